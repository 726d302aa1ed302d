package pgstore

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/history"
)

// The statements of a group's transaction. Each one handles every batch
// of the group at once through arrays (unnest), so a group costs the same
// number of statements whatever its size. They are plain SQL that
// CockroachDB and YugabyteDB accept too (see the package doc).
const (
	sqlBeginGroup = "BEGIN ISOLATION LEVEL READ COMMITTED"
	// A batch with conditions commits alone, serializably: its conditions
	// read records that no lock protects when they are absent.
	sqlBeginAlone = "BEGIN ISOLATION LEVEL SERIALIZABLE"

	// The fences: FOR SHARE holds the lease rows until COMMIT, so an
	// acquisition (an UPDATE of the row) waits for this transaction and
	// the epochs read are the ones the writes commit under.
	sqlFences = `SELECT shard_id, epoch FROM shards WHERE shard_id = ANY($1::int[]) FOR SHARE`

	sqlConds = `SELECT r.space, r.key, r.value FROM records r
JOIN unnest($1::smallint[], $2::bytea[]) AS c(space, key) ON r.space = c.space AND r.key = c.key`

	// The compare-and-set of existing runs' next event ids. Under READ
	// COMMITTED an UPDATE that waited for a concurrent writer of the row
	// re-checks next_id = expected on the row as that writer left it.
	sqlAdvance = `UPDATE runs SET next_id = u.next_id
FROM unnest($1::bytea[], $2::bytea[], $3::bigint[], $4::bigint[]) AS u(workflow_id, run_id, expected, next_id)
WHERE runs.workflow_id = u.workflow_id AND runs.run_id = u.run_id AND runs.next_id = u.expected
RETURNING runs.workflow_id, runs.run_id`

	// New runs (expected next event 1): a run that exists is not
	// inserted, and so not returned.
	sqlCreate = `INSERT INTO runs (workflow_id, run_id, next_id)
SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bigint[])
ON CONFLICT (workflow_id, run_id) DO NOTHING
RETURNING workflow_id, run_id`

	sqlEvents = `INSERT INTO events (workflow_id, run_id, event_id, data)
SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bigint[], $4::bytea[])`

	sqlPut = `INSERT INTO records (space, key, value)
SELECT * FROM unnest($1::smallint[], $2::bytea[], $3::bytea[])
ON CONFLICT (space, key) DO UPDATE SET value = excluded.value`

	// Batch.DeleteRuns: a run's events, then its head row (a run with no
	// row has no events, and its next append starts it again at 1).
	sqlDeleteEvents = `DELETE FROM events WHERE (workflow_id, run_id) IN (SELECT * FROM unnest($1::bytea[], $2::bytea[]))`
	sqlDeleteRuns   = `DELETE FROM runs WHERE (workflow_id, run_id) IN (SELECT * FROM unnest($1::bytea[], $2::bytea[]))`

	sqlDelete = `DELETE FROM records WHERE (space, key) IN (SELECT * FROM unnest($1::smallint[], $2::bytea[]))`
)

// step says how to read one queued statement's result.
type step uint8

const (
	stepExec step = iota
	stepFences
	stepConds
	stepAdvance
	stepCreate
)

// plan is a group's transaction: the members, and the pipeline of
// statements that checks and writes all of them.
type plan struct {
	members []*request
	b       *pgx.Batch
	steps   []step
}

// newPlan builds the pipeline for members (in queue order). Record writes
// of several members to one key are merged, the last one winning, since
// one statement may not touch a row twice; members append to distinct
// runs (formGroup).
func newPlan(members []*request) *plan {
	p := &plan{members: members, b: &pgx.Batch{}}
	begin := sqlBeginGroup
	if len(members) == 1 && len(members[0].conds) > 0 {
		begin = sqlBeginAlone
	}
	p.queue(stepExec, begin)
	p.queueFences()
	p.queueConds()
	p.queueRuns()
	p.queueRunDeletes()
	p.queueEvents()
	p.queueRecords()
	return p
}

func (p *plan) queue(st step, sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.steps = append(p.steps, st)
}

func (p *plan) queueFences() {
	var shards []int32
	seen := make(map[int]bool)
	for _, m := range p.members {
		for _, f := range m.fences {
			if !seen[f.Shard] {
				seen[f.Shard] = true
				shards = append(shards, int32(f.Shard))
			}
		}
	}
	if len(shards) > 0 {
		slices.Sort(shards)
		p.queue(stepFences, sqlFences, shards)
	}
}

func (p *plan) queueConds() {
	var spaces []int16
	var keys [][]byte
	for _, m := range p.members {
		for _, c := range m.conds {
			spaces = append(spaces, int16(c.Space))
			keys = append(keys, c.Key)
		}
	}
	if len(keys) > 0 {
		p.queue(stepConds, sqlConds, spaces, keys)
	}
}

// queueRuns queues the compare-and-set of the runs appended to, in key
// order (so that two stores sharing the database lock rows in one order).
func (p *plan) queueRuns() {
	var old, fresh []*appendReq
	for _, m := range p.members {
		for i := range m.appends {
			if a := &m.appends[i]; a.expected == 1 {
				fresh = append(fresh, a)
			} else {
				old = append(old, a)
			}
		}
	}
	byRun := func(a, b *appendReq) int {
		return cmp.Or(bytes.Compare(a.wf, b.wf), bytes.Compare(a.rid, b.rid))
	}
	if len(old) > 0 {
		slices.SortFunc(old, byRun)
		wf, run, exp, next := make([][]byte, len(old)), make([][]byte, len(old)), make([]int64, len(old)), make([]int64, len(old))
		for i, a := range old {
			wf[i], run[i], exp[i], next[i] = a.wf, a.rid, a.expected, a.next
		}
		p.queue(stepAdvance, sqlAdvance, wf, run, exp, next)
	}
	if len(fresh) > 0 {
		slices.SortFunc(fresh, byRun)
		wf, run, next := make([][]byte, len(fresh)), make([][]byte, len(fresh)), make([]int64, len(fresh))
		for i, a := range fresh {
			wf[i], run[i], next[i] = a.wf, a.rid, a.next
		}
		p.queue(stepCreate, sqlCreate, wf, run, next)
	}
}

// queueRunDeletes queues the deletion of the runs of Batch.DeleteRuns, in
// key order. formGroup keeps a run deleted by one member out of every
// other member's appends.
func (p *plan) queueRunDeletes() {
	var keys []runKey
	for _, m := range p.members {
		keys = append(keys, m.deletes...)
	}
	if len(keys) == 0 {
		return
	}
	slices.SortFunc(keys, func(a, b runKey) int { return cmp.Or(cmp.Compare(a.wf, b.wf), cmp.Compare(a.run, b.run)) })
	wf, run := make([][]byte, len(keys)), make([][]byte, len(keys))
	for i, k := range keys {
		wf[i], run[i] = []byte(k.wf), []byte(k.run)
	}
	p.queue(stepExec, sqlDeleteEvents, wf, run)
	p.queue(stepExec, sqlDeleteRuns, wf, run)
}

func (p *plan) queueEvents() {
	var wf, run, data [][]byte
	var ids []int64
	for _, m := range p.members {
		for _, a := range m.appends {
			for i, d := range a.data {
				wf, run, data = append(wf, a.wf), append(run, a.rid), append(data, d)
				ids = append(ids, a.expected+int64(i))
			}
		}
	}
	if len(ids) > 0 {
		p.queue(stepExec, sqlEvents, wf, run, ids, data)
	}
}

// queueRecords merges the members' puts and deletes (the last write of a
// key wins) and queues one upsert and one delete, in key order.
func (p *plan) queueRecords() {
	last := make(map[recKey]*recWrite)
	for _, m := range p.members {
		for i := range m.writes {
			w := &m.writes[i]
			last[recKey{w.space, string(w.key)}] = w
		}
	}
	if len(last) == 0 {
		return
	}
	ws := make([]*recWrite, 0, len(last))
	for _, w := range last {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *recWrite) int { return cmp.Or(cmp.Compare(a.space, b.space), bytes.Compare(a.key, b.key)) })
	var putSp, delSp []int16
	var putKey, putVal, delKey [][]byte
	for _, w := range ws {
		if w.del {
			delSp, delKey = append(delSp, int16(w.space)), append(delKey, w.key)
		} else {
			putSp, putKey, putVal = append(putSp, int16(w.space)), append(putKey, w.key), append(putVal, w.value)
		}
	}
	if len(putKey) > 0 {
		p.queue(stepExec, sqlPut, putSp, putKey, putVal)
	}
	if len(delKey) > 0 {
		p.queue(stepExec, sqlDelete, delSp, delKey)
	}
}

// judge returns the members whose checks failed, by index, with why.
func (p *plan) judge(res *results) map[int]error {
	var guilty map[int]error
	for i, m := range p.members {
		if err := res.check(m); err != nil {
			if guilty == nil {
				guilty = make(map[int]error)
			}
			guilty[i] = err
		}
	}
	return guilty
}

// check returns why m cannot commit, as far as the results that were read
// tell: a fence that does not hold (ErrFenced), a run that is not where
// its append expects (ErrConflict), a condition that fails (ErrConflict,
// or ErrCorrupt for a damaged record).
func (res *results) check(m *request) error {
	if res.fencesRead {
		for _, f := range m.fences {
			if epoch, ok := res.epochs[f.Shard]; !ok || epoch != f.Epoch {
				return fmt.Errorf("%w: pgstore: shard %d: the batch is fenced at epoch %d, the lease is at epoch %d",
					history.ErrFenced, f.Shard, f.Epoch, epoch)
			}
		}
	}
	for _, a := range m.appends {
		if a.expected == 1 && res.createRead && !res.created[a.key] {
			return fmt.Errorf("%w: pgstore: workflow %q run %q: expected a new run, but it has events",
				history.ErrConflict, a.run.WorkflowID, a.run.RunID)
		}
		if a.expected > 1 && res.advRead && !res.advanced[a.key] {
			return fmt.Errorf("%w: pgstore: workflow %q run %q: expected next event %d, but the history does not end at %d",
				history.ErrConflict, a.run.WorkflowID, a.run.RunID, a.expected, a.expected-1)
		}
	}
	if res.condsRead {
		for _, c := range m.conds {
			if err := res.checkCondition(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCondition checks one condition against the record read for it.
func (res *results) checkCondition(c history.Condition) error {
	sealed, found := res.conds[recKey{c.Space, string(c.Key)}]
	var value []byte
	if found {
		var err error
		if value, err = history.UnsealRecord(history.RecordID(c.Space, c.Key), sealed); err != nil {
			return err
		}
	}
	switch {
	case !c.Exists && found:
		return conflictf(c, "exists")
	case c.Exists && !found:
		return conflictf(c, "does not exist")
	case c.Exists && c.Value != nil && !bytes.Equal(value, c.Value):
		return conflictf(c, "has another value")
	}
	return nil
}

func conflictf(c history.Condition, what string) error {
	return fmt.Errorf("%w: pgstore: condition on %s key %x: record %s", history.ErrConflict, c.Space, c.Key, what)
}

// spaceOf converts a stored space number.
func spaceOf(n int16) history.Space {
	if n < 0 || n > 255 {
		return 0
	}
	return history.Space(n)
}
