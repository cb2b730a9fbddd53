package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// defaultLockTimeout is how long the read waits for a lock on the tool's table by default.
//
// Why a read must not wait long: PostgreSQL grants locks in order. A migration whose ALTER TABLE
// waits for a lock another session holds (a nightly dump, a long transaction) sits in the table's
// lock queue, and every later query on that table, a plain SELECT included, queues behind it. A
// check that read the table then would wait with them, and hold its own place in the queue for as
// long as --timeout (30 s). With lock_timeout 2 s it gives up instead, says why, and writes no
// report: the check Job fails (and retries under its backoffLimit), which never opens a gate.
const defaultLockTimeout = 2 * time.Second

// sessionLimits bound the report's read-only transaction inside the database: lock_timeout (the
// longest wait for any one lock) and statement_timeout (the longest any one statement runs,
// --timeout, which also bounds the whole read from the client's side). Both are SET LOCAL: they
// end with the transaction, so a connection pooler hands the session back as it was.
type sessionLimits struct {
	lock, statement time.Duration
}

// set applies the limits to tx. A zero limit is left as the server has it.
func (l sessionLimits) set(ctx context.Context, tx pgx.Tx) error {
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"lock_timeout", l.lock}, {"statement_timeout", l.statement}} {
		if s.d <= 0 {
			continue
		}
		// set_config(…, true) is SET LOCAL with a bound parameter.
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config($1, $2, true)", s.name, fmt.Sprintf("%dms", s.d.Milliseconds())); err != nil {
			return fmt.Errorf("setting %s: %w", s.name, err)
		}
	}
	return nil
}

// PostgreSQL's error codes for a lock wait and a statement cut short by lock_timeout and
// statement_timeout.
const (
	codeLockNotAvailable = "55P03"
	codeQueryCanceled    = "57014"
)

// explain says which limit ended a read, for the message on stderr.
func (l sessionLimits) explain(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case codeLockNotAvailable:
		return fmt.Errorf("the table is locked by another session and the read gave up after lock_timeout %s (a migration may be running, or waiting for a lock itself; nothing was read, and the check never queues behind it): %w", l.lock, err)
	case codeQueryCanceled:
		return fmt.Errorf("the read ran longer than statement_timeout %s: %w", l.statement, err)
	}
	return err
}
