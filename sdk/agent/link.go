package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// Approvals that arrive as a link or a webhook (Options.ApprovalLinks).
//
// When a call starts waiting for approval, the agent also runs the
// activity ApprovalLinkActivity, which hands the request and the
// activity's task token to the application's ApprovalNotifier (an e-mail
// with approve and reject links, a chat message with buttons, a ticket
// whose webhook calls back) and returns activities.ErrResultPending. Whoever
// follows the link completes it with CompleteApproval (the token and an
// Approval): the activity's result decides the call exactly as the
// approval signal would. The signal, the update and `cairn workflow
// approve` keep working meanwhile; the first decision wins, and a later
// one is recorded as ignored.
//
// On the worker:
//
//	w.RegisterActivity(agent.ApprovalLinkFunc(mailer), agent.ApprovalLinkActivityOptions)
//
// In the webhook's handler:
//
//	err := agent.CompleteApproval(ctx, c, r.URL.Query().Get("token"), agent.Approval{Approved: true, By: user})

// ApprovalLinkActivity is the activity type of approval requests sent as
// links (ApprovalLinkFunc).
const ApprovalLinkActivity = "agent.RequestApproval"

// ApprovalLinkPrefix starts the activity id of an approval request sent
// as a link: "approval:" and the call's key (history.ToolCallKey).
const ApprovalLinkPrefix = "approval:"

// DefaultApprovalLinkTimeout is how long an approval link stays valid
// when Options.ApprovalTimeout is not set: its activity's start-to-close
// timeout, after which the link's token is refused (api.ErrStaleAttempt)
// and the call waits for the signal only.
const DefaultApprovalLinkTimeout = 7 * 24 * time.Hour

// ApprovalLinkActivityOptions register ApprovalLinkFunc's activity:
// Idempotent, so its intent is recorded before it runs (its task token
// survives a server restart) and the notifier gets an idempotency key
// (activities.GetInfo(ctx).IdempotencyKey) to send the request once.
var ApprovalLinkActivityOptions = activities.Options{Name: ApprovalLinkActivity, Effect: activities.Idempotent}

// ApprovalLink is an approval request to send as a link: the run, the
// call and what it would do, and the token that answers it.
type ApprovalLink struct {
	WorkflowID string
	RunID      string
	CallID     string
	Tool       string
	// Arguments are the model's arguments for the call (JSON).
	Arguments string
	// Token is the printable task token (activities.FormatTaskToken) that
	// CompleteApproval takes: put it in the link. Whoever holds it can
	// decide the call.
	Token string
}

// ApprovalNotifier sends an approval request to the people who decide
// (the application's mailer, chat bot, ticketing system). It returns once
// the request is handed over; an error fails the activity (the call still
// takes the signal).
type ApprovalNotifier interface {
	NotifyApproval(ctx context.Context, link ApprovalLink) error
}

// ApprovalNotifierFunc is an ApprovalNotifier as a function.
type ApprovalNotifierFunc func(ctx context.Context, link ApprovalLink) error

// NotifyApproval calls f.
func (f ApprovalNotifierFunc) NotifyApproval(ctx context.Context, link ApprovalLink) error {
	return f(ctx, link)
}

// ApprovalLinkFunc returns the activity that sends approval requests
// through n; register it with ApprovalLinkActivityOptions.
func ApprovalLinkFunc(n ApprovalNotifier) func(ctx context.Context, link ApprovalLink) (Approval, error) {
	return func(ctx context.Context, link ApprovalLink) (Approval, error) {
		info := activities.GetInfo(ctx)
		if info == nil {
			return Approval{}, errors.New("agent: the approval link activity runs outside a worker")
		}
		link.Token = info.TaskTokenString()
		if err := n.NotifyApproval(ctx, link); err != nil {
			return Approval{}, err
		}
		return Approval{}, activities.ErrResultPending
	}
}

// CompleteApproval decides the call an approval link names: token is the
// link's ApprovalLink.Token, ap the decision (its CallID is ignored: the
// token names the call). A link followed after the call was decided
// otherwise (the signal, the update, the timeout) is recorded as ignored
// (history.IgnoredApproval), never applied. It fails wrapping
// api.ErrStaleAttempt once the link has expired (ApprovalTimeout, or
// DefaultApprovalLinkTimeout) or with a decision other than the one the
// link already took, and api.ErrInvalidArgument for a malformed token.
// The same decision sent twice (a retried webhook) is taken once.
func CompleteApproval(ctx context.Context, c client.Client, token string, ap Approval) error {
	tok, err := activities.ParseTaskToken(token)
	if err != nil {
		return fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	ap.CallID = ""
	return c.CompleteActivity(ctx, client.ByToken(tok), ap)
}

// requestByLink runs the approval link activity of the call awaiting
// approval in slot, and applies its answer as an approval signal's would
// be. The returned function withdraws the request (once the call is
// decided).
func (a *Agent) requestByLink(ctx sdk.Context, key string, slot *approvalSlot) sdk.CancelFunc {
	timeout := a.opts.ApprovalTimeout
	if timeout <= 0 {
		timeout = DefaultApprovalLinkTimeout
	}
	actx, cancel := sdk.WithCancel(ctx)
	actx = sdk.WithActivityOptions(actx, sdk.ActivityOptions{ActivityID: ApprovalLinkPrefix + key, StartToCloseTimeout: timeout,
		RetryPolicy: &sdk.RetryPolicy{MaximumAttempts: 1}})
	info := sdk.GetInfo(ctx)
	f := sdk.ExecuteActivityByName[Approval](actx, ApprovalLinkActivity, ApprovalLink{WorkflowID: info.WorkflowID, RunID: info.RunID,
		CallID: slot.callID, Tool: slot.call.Name, Arguments: slot.call.Arguments})
	sdk.GoNamed(ctx, "agent-approval-link-"+slot.callID, func(ctx sdk.Context) {
		ap, err := f.Get(ctx)
		if err != nil {
			return // withdrawn, expired, or the notifier failed: the call takes the signal
		}
		ap.CallID = slot.callID
		if slot.ap == nil && !slot.over {
			slot.ap = &ap
			a.decided[slot.callID] = ap
			return
		}
		a.ignore(ctx, ap, "the approval link came after the call was decided: "+a.alreadyDecided(slot.callID))
	})
	return cancel
}
