// Command skipq-worker is a skipq worker in Go (pgx v4), speaking the SQL
// protocol of docs/protocol.md.
//
// Responsibility: claim jobs with skipq_claim, run a handler per kind while a
// heartbeat extends the lease, and record the outcome with skipq_complete or
// skipq_fail, always presenting the claim's lease (the fencing token).
// Invariants: a handler never runs under an open transaction; an outcome the
// database rejects (the lease moved on) is counted as stale and changes nothing.
// It must never update the jobs table directly: the functions are the protocol.
//
// Build offline with Debian's packages:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o skipq-worker .
//
// Usage (DSN from -dsn or DATABASE_URL):
//
//	skipq-worker run|drain -schema S [-queue Q,R] [-concurrency N] [-lease-ms N]
//	skipq-worker complete -schema S -id ID -lease LEASE
//	skipq-worker fail -schema S -id ID -lease LEASE -error E [-delay-ms N]
//	skipq-worker complete-tx -schema S -id ID -lease LEASE -table T [-result JSON] [-rollback]
//
// complete-tx is the transactional completion (docs/protocol.md): in one
// transaction of its own it inserts the business row (job_id) into table T
// and calls skipq_complete, then commits — or rolls back when -rollback is
// given or the lease was stale, so the row exists if and only if the job
// was completed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v4/pgxpool"
)

// Job is a claimed job as a handler sees it.
type Job struct {
	ID       int64
	Queue    string
	Kind     string
	Payload  json.RawMessage
	Attempts int32
	Lease    int64
}

// Handler runs one job; an error fails it (retry with backoff, or dead when attempts are used up).
type Handler func(ctx context.Context, job Job) error

var handlers = map[string]Handler{
	"polyglot.echo": func(ctx context.Context, job Job) error { return nil },
	"polyglot.sum": func(ctx context.Context, job Job) error {
		var p struct {
			Numbers []float64 `json:"numbers"`
		}
		if err := json.Unmarshal(job.Payload, &p); err != nil || p.Numbers == nil {
			return errors.New("payload.numbers must be a list")
		}
		return nil
	},
	"polyglot.fail": func(ctx context.Context, job Job) error {
		var p struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(job.Payload, &p)
		if p.Message == "" {
			p.Message = "failed on purpose"
		}
		return errors.New(p.Message)
	},
}

func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// backoffMs is capped exponential with jitter, as src/backoff.ts.
func backoffMs(attempt int32) float64 {
	const base, max, jitter = 1000.0, 3_600_000.0, 0.2
	exp := math.Min(math.Max(float64(attempt-1), 0), 52)
	delay := math.Min(max, base*math.Pow(2, exp))
	return math.Round(math.Min(max*(1+jitter), delay*(1-jitter+2*jitter*rand.Float64())))
}

type worker struct {
	pool    *pgxpool.Pool
	s       string
	queues  []string
	conc    int
	leaseMs float64
	id      string
	mu      sync.Mutex
	summary map[string]int
}

func (w *worker) count(what string) {
	w.mu.Lock()
	w.summary[what]++
	w.mu.Unlock()
}

func (w *worker) claim(ctx context.Context, n int) ([]Job, error) {
	rows, err := w.pool.Query(ctx,
		"SELECT id, queue, kind, payload::text, attempts, lease FROM "+w.s+".skipq_claim($1::text[], $2, $3, $4)",
		w.queues, n, w.id, w.leaseMs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		var j Job
		var payload string
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &payload, &j.Attempts, &j.Lease); err != nil {
			return nil, err
		}
		j.Payload = json.RawMessage(payload)
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

func (w *worker) complete(ctx context.Context, id, lease int64) (bool, error) {
	var ok bool
	err := w.pool.QueryRow(ctx, "SELECT "+w.s+".skipq_complete($1, $2)", id, lease).Scan(&ok)
	return ok, err
}

// fail returns the new status ("pending" or "dead"), or nil when the lease was stale.
func (w *worker) fail(ctx context.Context, id, lease int64, msg string, delayMs float64) (*string, error) {
	var status *string
	err := w.pool.QueryRow(ctx, "SELECT "+w.s+".skipq_fail($1, $2, $3, $4)", id, lease, msg, delayMs).Scan(&status)
	return status, err
}

// completeTx records the business row and the completion in one transaction: both commit, or neither.
func (w *worker) completeTx(ctx context.Context, id, lease int64, table, result string, rollback bool) (bool, bool, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return false, false, err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, "INSERT INTO "+quoteQualified(table)+" (job_id) VALUES ($1)", id); err != nil {
		return false, false, err
	}
	var ok bool
	var res *string
	if result != "" {
		res = &result
	}
	if err := tx.QueryRow(ctx, "SELECT "+w.s+".skipq_complete($1, $2, $3::jsonb)", id, lease, res).Scan(&ok); err != nil {
		return false, false, err
	}
	// A stale lease: nothing of this attempt may commit, the business row included.
	if !ok || rollback {
		return ok, false, tx.Rollback(ctx)
	}
	return ok, true, tx.Commit(ctx)
}

func quoteQualified(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = quoteIdent(p)
	}
	return strings.Join(parts, ".")
}

func (w *worker) heartbeat(ctx context.Context, id, lease int64) (bool, error) {
	var ok bool
	err := w.pool.QueryRow(ctx, "SELECT "+w.s+".skipq_heartbeat($1, $2, $3)", id, lease, w.leaseMs).Scan(&ok)
	return ok, err
}

func (w *worker) execute(ctx context.Context, job Job) {
	h, known := handlers[job.Kind]
	if !known {
		h = func(context.Context, Job) error { return fmt.Errorf("no Go handler for kind %q", job.Kind) }
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h(hctx, job) }()
	// Heartbeat every third of the lease; a lost lease cancels the handler and records nothing.
	tick := time.NewTicker(time.Duration(w.leaseMs/3) * time.Millisecond)
	defer tick.Stop()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-done:
			waiting = false
		case <-tick.C:
			if ok, hbErr := w.heartbeat(ctx, job.ID, job.Lease); hbErr == nil && !ok {
				cancel()
				w.count("stale")
				return
			}
		}
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > 8192 {
			msg = msg[:8192]
		}
		status, ferr := w.fail(ctx, job.ID, job.Lease, msg, backoffMs(job.Attempts))
		switch {
		case ferr != nil:
			fmt.Fprintln(os.Stderr, "fail:", ferr)
		case status == nil:
			w.count("stale")
		default:
			w.count("failed")
		}
		return
	}
	ok, cerr := w.complete(ctx, job.ID, job.Lease)
	switch {
	case cerr != nil:
		fmt.Fprintln(os.Stderr, "complete:", cerr)
	case ok:
		w.count("completed")
	default:
		w.count("stale")
	}
}

func (w *worker) run(ctx context.Context, drain bool) error {
	slots := make(chan struct{}, w.conc)
	var wg sync.WaitGroup
	for ctx.Err() == nil {
		free := w.conc - len(slots)
		var jobs []Job
		if free > 0 {
			var err error
			if jobs, err = w.claim(ctx, free); err != nil {
				if ctx.Err() != nil {
					break
				}
				return err
			}
		}
		w.mu.Lock()
		w.summary["claimed"] += len(jobs)
		w.mu.Unlock()
		for _, job := range jobs {
			slots <- struct{}{}
			wg.Add(1)
			go func(j Job) {
				defer wg.Done()
				defer func() { <-slots }()
				// Outcomes are written even while shutting down: a context of their own.
				w.execute(context.Background(), j)
			}(job)
		}
		if len(jobs) == 0 {
			if drain && len(slots) == 0 {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(pollWait(drain)):
			}
		}
	}
	wg.Wait()
	return nil
}

func pollWait(drain bool) time.Duration {
	if drain {
		return 20 * time.Millisecond
	}
	return time.Second
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: skipq-worker run|drain|complete|complete-tx|fail [flags]")
		os.Exit(2)
	}
	command := os.Args[1]
	fs := flag.NewFlagSet(command, flag.ExitOnError)
	dsn := fs.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	schema := fs.String("schema", "skipq", "skipq schema")
	queues := fs.String("queue", "default", "comma-separated queues")
	conc := fs.Int("concurrency", 10, "handlers at once")
	leaseMs := fs.Float64("lease-ms", 30000, "lease per claim and heartbeat, in ms")
	id := fs.Int64("id", 0, "job id (complete, fail)")
	lease := fs.Int64("lease", 0, "lease from the claim (complete, fail)")
	msg := fs.String("error", "failed", "error text (fail)")
	delayMs := fs.Float64("delay-ms", 0, "retry delay (fail)")
	table := fs.String("table", "", "business table, schema.table, with a job_id column (complete-tx)")
	result := fs.String("result", "", "the job's result as JSON (complete-tx)")
	rollback := fs.Bool("rollback", false, "roll the transaction back instead of committing (complete-tx)")
	_ = fs.Parse(os.Args[2:])
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "no database: pass -dsn or set DATABASE_URL")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.Connect(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	defer pool.Close()
	host, _ := os.Hostname()
	w := &worker{pool: pool, s: quoteIdent(*schema), queues: strings.Split(*queues, ","), conc: *conc,
		leaseMs: *leaseMs, id: fmt.Sprintf("go:%s:%d", host, os.Getpid()), summary: map[string]int{}}
	out := json.NewEncoder(os.Stdout)
	switch command {
	case "complete":
		ok, err := w.complete(ctx, *id, *lease)
		exitOn(err)
		_ = out.Encode(map[string]any{"accepted": ok})
	case "complete-tx":
		ok, committed, err := w.completeTx(ctx, *id, *lease, *table, *result, *rollback)
		exitOn(err)
		_ = out.Encode(map[string]any{"accepted": ok, "committed": committed})
	case "fail":
		status, err := w.fail(ctx, *id, *lease, *msg, *delayMs)
		exitOn(err)
		_ = out.Encode(map[string]any{"accepted": status != nil, "status": status})
	case "run", "drain":
		exitOn(w.run(ctx, command == "drain"))
		summary := map[string]any{"worker": w.id}
		for k, v := range w.summary {
			summary[k] = v
		}
		_ = out.Encode(summary)
	default:
		fmt.Fprintln(os.Stderr, "unknown command", command)
		os.Exit(2)
	}
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
