package llm_test

import (
	"testing"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/history"
)

// An answer with neither text nor a tool call fails the call, retryably,
// unless the transcript's settings allow it; streamed or not.
func TestEmptyAnswerFailsTheCall(t *testing.T) {
	chunks := history.MemChunks{}
	for _, stream := range []bool{false, true} {
		for _, allow := range []bool{false, true} {
			cfg := settings(stream)
			cfg.Config.AllowEmptyAnswer = allow
			in := transcript(t, chunks, []history.TranscriptEntry{cfg, msg("user", "hi")})
			m := newModel(t, fakellm.New(fakellm.Script{fakellm.Say("  ")}))
			r := &recorder{}
			res, err := chat(m, r.ctx(chunks), in)
			if allow {
				if err != nil || res.Message.Content != "  " {
					t.Errorf("stream %v, allowed: %+v %v", stream, res, err)
				}
				continue
			}
			if app := appErr(t, err); app.Type != llm.FailureEmptyAnswer || app.NonRetryable || r.usage.Tokens() == 0 {
				t.Errorf("stream %v: %v (non-retryable %v), usage %+v", stream, err, app.NonRetryable, r.usage)
			}
		}
	}
}
