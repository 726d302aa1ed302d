// Package sdk is what agent authors import: the workflow API and its
// deterministic runtime.
//
// An agent is an ordinary Go function, a workflow. Every model call and
// every tool call it makes runs as an activity, whose result is recorded in
// the run's history; after a crash, an eviction or a deploy, a worker
// replays the history through the same code and the run continues where it
// was, without calling the model or any tool again.
//
//	func PayInvoice(ctx sdk.Context, inv Invoice) (Receipt, error) {
//		ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
//		ok, err := sdk.ExecuteActivity(ctx, CheckBudget, inv).Get(ctx)
//		if err != nil || !ok {
//			return Receipt{}, err
//		}
//		approval := sdk.GetSignalChannel[Approval](ctx, "approve").Receive(ctx) // human gate
//		if !approval.OK {
//			return Receipt{}, ErrRejected
//		}
//		return sdk.ExecuteActivity(ctx, SendPayment, Payment{Invoice: inv.ID, Amount: inv.Amount}).Get(ctx)
//	}
//
//	reg := sdk.NewRegistry()
//	reg.RegisterWorkflow(PayInvoice)
//	reg.RegisterActivity(CheckBudget)
//	reg.RegisterActivity(SendPayment, sdk.RegisterActivityOptions{Effect: history.SideEffect})
//
// # Rules for workflow code
//
// Workflow code must be deterministic: given the same history it must make
// the same calls in the same order. Use the SDK instead of the language's
// concurrency and clocks: Go instead of the go statement, NewChannel and
// NewSelector instead of chan and select, Sleep and NewTimer instead of
// time.Sleep and time.After, Now instead of time.Now, SideEffect for random
// values, GetVersion to change code under running workflows. Work with the
// outside world (I/O, model calls) belongs in activities.
//
// # The runtime
//
// Each coroutine (the workflow function and each Go) runs on its own
// goroutine, but exactly one runs at a time and it yields only inside SDK
// calls that block (Future.Get, Receive, Send, Select, Await, Sleep), so
// scheduling never depends on the Go scheduler. A coroutine that blocks
// anywhere else is reported after ExecutionOptions.DeadlockTimeout as a
// *DeadlockError with its stack and abandoned; a panic fails the workflow
// task with a *PanicError. Either way the worker survives and the task is
// retried.
//
// Replay compares every command the code produces with the event recorded
// for it (kind, activity or child type, ids, and the encoded arguments); a
// difference is a *NondeterminismError naming the event id, what history
// recorded and what the code produced.
//
// An accepted update (SetUpdateHandler) runs its handler in a coroutine of
// its own, started when the code reaches the update's
// WorkflowUpdateAccepted event, like a signal delivered in history order;
// its validator runs between tasks, as a query does, and must not block or
// issue commands.
//
// Workers drive the runtime through Execution: NewExecution, ProcessTask for
// every workflow task, Query and ValidateUpdate between tasks, Close on
// eviction.
//
// Canceling the context a child workflow was started with cancels the
// child: one not sent yet is withdrawn, a started one is asked to cancel
// and its outcome (a *ChildWorkflowError wrapping a *CanceledError, or its
// result if it completes anyway) resolves the future. ParentClosePolicy
// governs the children still open when the parent closes.
package sdk
