package ui

import (
	"net/http"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
)

// apiCompare answers GET /api/compare?a=ID[/RUN]&b=ID[/RUN]: where the two
// runs diverge and what each did (view.Compare, the CLI's `cairn workflow
// compare --json`). A run is a workflow id (its current run), or the id, a
// "/" and a full run id.
func (h *Handler) apiCompare(r *http.Request) (any, error) {
	q := r.URL.Query()
	if q.Get("a") == "" || q.Get("b") == "" {
		return nil, invalid("a and b are required: two runs, each ID or ID/RUN")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	var runs [2]*view.RunData
	for i, ref := range []string{q.Get("a"), q.Get("b")} {
		id, run := view.SplitRunRef(ref)
		d, err := view.LoadRun(ctx, h.svc, id, run)
		if err != nil {
			return nil, err
		}
		runs[i] = d
	}
	return view.Compare(runs[0], runs[1]), nil
}
