package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// roundOutcome is what one transaction of a group came to: committed,
// or some members whose checks failed (guilty, by index), or a failure
// of the whole transaction.
type roundOutcome struct {
	committed bool
	guilty    map[int]error
	err       error
	unknown   bool // err came after COMMIT was sent
}

// mapped is the error the members of a failed round are answered with.
func (o roundOutcome) mapped() error {
	if o.unknown {
		return fmt.Errorf("%w: %w", ErrCommitUnknown, o.err)
	}
	return commitError(o.err)
}

// round runs members as one transaction: one pipeline (BEGIN, the checks,
// the writes) and, if every check held, COMMIT. The checks are statements
// whose results name the batches they fail for: the fence epochs read
// FOR SHARE, the runs whose next-id compare-and-set matched, the new runs
// inserted, the records a condition reads. When some batch fails its
// checks the transaction is rolled back and those batches are returned.
func (s *Store) round(members []*request) roundOutcome {
	s.stats.rounds.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.CommitTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return roundOutcome{err: err}
	}
	defer conn.Release()
	p := newPlan(members)
	if s.hooks.beforeRound != nil {
		s.hooks.beforeRound()
	}
	res, err := p.send(ctx, conn.Conn())
	s.stats.statements.Add(int64(p.b.Len()))
	guilty := p.judge(res)
	if err != nil || len(guilty) > 0 {
		s.rollback(ctx, conn)
		if len(guilty) > 0 {
			return roundOutcome{guilty: guilty}
		}
		return roundOutcome{err: err}
	}
	if s.hooks.beforeCommit != nil {
		s.hooks.beforeCommit()
	}
	s.stats.statements.Add(1)
	tag, err := conn.Exec(ctx, "COMMIT")
	switch {
	case err == nil && tag.String() == "COMMIT":
		return roundOutcome{committed: true}
	case err == nil:
		return roundOutcome{err: fmt.Errorf("COMMIT answered %q: the transaction was rolled back", tag.String())}
	case pgCode(err) != "" && !fatal(err):
		return roundOutcome{err: err} // the server refused it: rolled back
	}
	// Anything else may have happened after the server committed: a lost
	// connection (not even pgconn.SafeToRetry can tell: pgx v5.12 reports
	// a COMMIT whose answer was lost as "conn closed", safe to retry), or
	// a FATAL error, which ends the session whether or not the commit
	// record was written (a shutdown while waiting for a synchronous
	// standby comes after the local commit).
	return roundOutcome{err: err, unknown: true}
}

// rollback ends a failed round's transaction. A connection that cannot
// is dropped by the pool (Release destroys a connection left in a
// transaction).
func (s *Store) rollback(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	s.stats.statements.Add(1)
	_, _ = conn.Exec(ctx, "ROLLBACK")
}

// results are what a round's check statements returned. A check whose
// statement did not run (an earlier one failed) judges nothing.
type results struct {
	epochs     map[int]int64 // shard → epoch; nil unless read
	advanced   map[runKey]bool
	created    map[runKey]bool
	conds      map[recKey][]byte // sealed values of existing condition records
	fencesRead bool
	advRead    bool
	createRead bool
	condsRead  bool
}

// send queues the plan's statements in one pipeline and reads their
// results. The transaction stays open; on error it is aborted.
func (p *plan) send(ctx context.Context, conn *pgx.Conn) (*results, error) {
	res := &results{}
	br := conn.SendBatch(ctx, p.b)
	err := p.read(br, res)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// read reads the pipeline's results in order.
func (p *plan) read(br pgx.BatchResults, res *results) error {
	for _, st := range p.steps {
		var err error
		switch st {
		case stepExec:
			_, err = br.Exec()
		case stepFences:
			res.epochs, err = readEpochs(br)
			res.fencesRead = err == nil
		case stepConds:
			res.conds, err = readRecords(br)
			res.condsRead = err == nil
		case stepAdvance:
			res.advanced, err = readRuns(br)
			res.advRead = err == nil
		case stepCreate:
			res.created, err = readRuns(br)
			res.createRead = err == nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func readEpochs(br pgx.BatchResults) (map[int]int64, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64)
	var shard int32
	var epoch int64
	_, err = pgx.ForEachRow(rows, []any{&shard, &epoch}, func() error {
		out[int(shard)] = epoch
		return nil
	})
	return out, err
}

func readRuns(br pgx.BatchResults) (map[runKey]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := make(map[runKey]bool)
	var wf, run []byte
	_, err = pgx.ForEachRow(rows, []any{&wf, &run}, func() error {
		out[runKey{string(wf), string(run)}] = true
		return nil
	})
	return out, err
}

func readRecords(br pgx.BatchResults) (map[recKey][]byte, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := make(map[recKey][]byte)
	var sp int16
	var key, value []byte
	_, err = pgx.ForEachRow(rows, []any{&sp, &key, &value}, func() error {
		out[recKey{spaceOf(sp), string(key)}] = value
		return nil
	})
	return out, err
}
