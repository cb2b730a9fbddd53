package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// A migration stopped while its DDL waits for a lock (the Job's deadline, a deleted pod) can
// outlive its process: the server notices a vanished client only when it next talks to it, and a
// session waiting for a lock does not, so it keeps its place in the table's lock queue, and every
// query on that table waits behind it, until the lock is granted and the DDL runs after all.
// The next attempt would then wait beside it. So run names the command's sessions (PGAPPNAME,
// which libpq, pgx and the tools built on them read, unless the URL or the environment sets an
// application_name of its own) and ends them: stopGrace after a SIGTERM the command has not
// obeyed (its tool may not cancel a running statement), and once the command has exited.

// stopGrace is how long run waits after forwarding a signal before it ends the command's
// sessions; well inside the kubelet's default grace period of 30 s.
const stopGrace = 2 * time.Second

// sessionTag is the application_name of one run's command, or "" when the command's sessions
// cannot be told apart (PGAPPNAME is set already).
type sessionTag struct {
	name string
	cc   *pgx.ConnConfig
	log  *logger
}

func newSessionTag(cfg config, log *logger) *sessionTag {
	t := &sessionTag{cc: cfg.connConfig, log: log}
	if os.Getenv("PGAPPNAME") != "" || cfg.connConfig == nil {
		return t
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return t
	}
	t.name = "schemagate-migration-" + hex.EncodeToString(b)
	return t
}

// env is the command's environment: this process's, with PGAPPNAME set to the tag.
func (t *sessionTag) env() []string {
	env := os.Environ()
	if t.name != "" {
		env = append(env, "PGAPPNAME="+t.name)
	}
	return env
}

// endAfter ends the command's sessions if it has not exited stopGrace after a signal.
func (t *sessionTag) endAfter(exited <-chan struct{}) {
	select {
	case <-exited:
	case <-time.After(stopGrace):
		t.end("the command has not stopped " + stopGrace.String() + " after the signal")
	}
}

// end terminates every session of the command that is still there, and says so.
func (t *sessionTag) end(why string) {
	if t.name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, t.cc)
	if err != nil {
		t.log.printf("could not check for database sessions the command left behind: %v", err)
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var ended int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(pid))
		FROM pg_catalog.pg_stat_activity WHERE application_name = $1 AND pid <> pg_catalog.pg_backend_pid()`, t.name).Scan(&ended)
	switch {
	case err != nil:
		t.log.printf("could not end the database sessions the command left behind: %v", err)
	case ended > 0:
		t.log.printf("%s: ended %d database session(s) it left behind (application_name %s), so that none keeps waiting for a lock", why, ended, t.name)
	}
}
