package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// readLiquibase reads Liquibase's changelog table (databasechangelog, lower-case in PostgreSQL)
// "by tag": the version is the tag of the latest row (by orderexecuted) with a non-empty tag, a
// leading v or V stripped ("v1.2" is 1.2); no tagged row or no table: version 0. The database
// is dirty when the lock table (databasechangeloglock) has a row with locked = true, which a
// Liquibase that died mid-update leaves behind but a running Liquibase also holds, or when a
// changeset's exectype is FAILED.
func readLiquibase(ctx context.Context, q querier, w target) (state, error) {
	var st state
	t, ok, err := findTable(ctx, q, w.schema, w.table)
	if err != nil {
		return state{}, err
	}
	lockSchema := w.schema
	if ok {
		if lockSchema == "" {
			// Liquibase keeps its lock table beside its changelog table.
			lockSchema = t.schema
		}
		if st, err = liquibaseTag(ctx, q, t); err != nil {
			return state{}, err
		}
	} else {
		st = noTable(w.schema, w.table)
	}

	lock, ok, err := findTable(ctx, q, lockSchema, w.lockTable)
	if err != nil {
		return state{}, err
	}
	if ok {
		var locked bool
		var by string
		err := q.QueryRow(ctx, "SELECT coalesce(lockedby, '') FROM "+lock.ident+" WHERE locked LIMIT 1").Scan(&by)
		switch {
		case err == nil:
			locked = true
		case !errors.Is(err, pgx.ErrNoRows):
			return state{}, fmt.Errorf("reading %s: %w", lock.name, err)
		}
		if locked {
			st.Dirty = true
			st.Notes = append(st.Notes, fmt.Sprintf("%s is locked (by %q): a Liquibase update is running, or one died mid-update; if none runs, check the database and run `liquibase release-locks`", lock.name, by))
		}
	}
	return st, nil
}

// liquibaseTag reads the version and the FAILED rows from the changelog table t.
func liquibaseTag(ctx context.Context, q querier, t table) (state, error) {
	var st state
	var tag string
	err := q.QueryRow(ctx, "SELECT tag FROM "+t.ident+` WHERE tag IS NOT NULL AND btrim(tag) <> ''
		ORDER BY orderexecuted DESC, dateexecuted DESC LIMIT 1`).Scan(&tag)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		st.Version = "0"
		st.Notes = append(st.Notes, t.name+" has no tagged changeset: reporting version 0 (tag the database after an update, e.g. liquibase tag v2)")
	case err != nil:
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	default:
		v := strings.TrimSpace(tag)
		if len(v) > 1 && (v[0] == 'v' || v[0] == 'V') {
			v = v[1:]
		}
		if err := checkVersion(v, fmt.Sprintf("%s tag %q, read as version", t.name, tag)); err != nil {
			return state{}, err
		}
		st.Version = v
	}
	var failed int64
	if err := q.QueryRow(ctx, "SELECT count(*) FROM "+t.ident+" WHERE upper(exectype) = 'FAILED'").Scan(&failed); err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	if failed > 0 {
		st.Dirty = true
		st.Notes = append(st.Notes, fmt.Sprintf("%s has %d changeset(s) with exectype FAILED: the database is dirty", t.name, failed))
	}
	return st, nil
}
