package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// report reads the database's version as cfg.tool records it and writes the report to the
// report path and to stdout. It returns exitClean, exitDirty, exitBelow (clean, but below
// --require), or exitNoReport when no report could be produced or written to the path.
func report(ctx context.Context, cfg config, stdout io.Writer, log *logger) int {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	st, err := readState(ctx, cfg.connConfig, cfg.tool, cfg.where, cfg.limits)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (--timeout %s)", err, cfg.timeout)
		}
		log.printf("no schema report: %v", err)
		return exitNoReport
	}
	for _, n := range st.Notes {
		log.printf("%s", n)
	}
	b, err := schemareport.Encode(schemareport.Report{Version: st.Version, Dirty: st.Dirty, Tool: cfg.tool.name, Time: time.Now(), Error: cfg.toolError})
	if err != nil {
		log.printf("no schema report: %v", err)
		return exitNoReport
	}
	code := exitClean
	switch {
	case st.Dirty:
		code = exitDirty
	case cfg.require != "" && !schemaversion.AtLeast(st.Version, cfg.require):
		log.printf("the database is at version %s, below --require %s", st.Version, cfg.require)
		code = exitBelow
	}
	if err := writeReportFile(cfg.reportPath, b); err != nil {
		if !cfg.defaultPath || !errors.Is(err, fs.ErrNotExist) {
			log.printf("no schema report at %s: %v", cfg.reportPath, err)
			code = exitNoReport
		} else {
			log.printf("%s does not exist (not running in Kubernetes?): the report is on stdout only", cfg.reportPath)
		}
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return code
}

// writeReportFile writes the report to path ("-": nowhere). The kubelet creates the default
// path; it is never created here, so that outside a container nothing appears in /dev.
func writeReportFile(path string, b []byte) error {
	if path == "-" {
		return nil
	}
	flags := os.O_WRONLY | os.O_TRUNC
	if path != defaultReportPath {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// readState connects and reads the version in one read-only transaction (a consistent snapshot;
// nothing is ever written), bounded by limits, and checks that it is a dotted numeric version.
// The version is returned in its canonical spelling ("2.0" → "2").
func readState(ctx context.Context, cc *pgx.ConnConfig, t tool, at target, limits sessionLimits) (state, error) {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return state{}, fmt.Errorf("connecting to the database: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return state{}, fmt.Errorf("starting a read-only transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := limits.set(ctx, tx); err != nil {
		return state{}, err
	}
	st, err := t.read(ctx, tx, at)
	if err != nil {
		return state{}, fmt.Errorf("reading the %s version: %w", t.name, limits.explain(err))
	}
	if err := checkVersion(st.Version, t.name+" version"); err != nil {
		return state{}, err
	}
	st.Version = schemaversion.Canonical(st.Version)
	return st, nil
}
