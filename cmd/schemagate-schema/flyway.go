package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// readFlyway reads Flyway's schema history (flyway_schema_history: installed_rank, version
// (NULL for repeatable migrations), type, success, …). The version is the highest one among the
// successful rows, in the order installed, compared as dotted numbers; Flyway writes 1_2 for 1.2.
// Two row types take a version back out: DELETE (flyway repair marked a missing migration
// deleted) and UNDO_* (an undo migration ran). Any row with success = false makes the database
// dirty (Flyway refuses to migrate until `flyway repair`); the version is then still the highest
// successful one. No table: version 0.
func readFlyway(ctx context.Context, q querier, w target) (state, error) {
	t, ok, err := findTable(ctx, q, w.schema, w.table)
	if err != nil || !ok {
		return noTable(w.schema, w.table), err
	}
	rows, err := q.Query(ctx, "SELECT installed_rank, version, coalesce(type, ''), success FROM "+t.ident+" ORDER BY installed_rank")
	if err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	defer rows.Close()
	// applied holds each applied version, by its canonical spelling when it has one, with the
	// spelling and rank of its row.
	type row struct {
		version string
		rank    int64
	}
	applied := map[string]row{}
	var order []string
	var st state
	for rows.Next() {
		var rank int64
		var version *string
		var typ string
		var success bool
		if err := rows.Scan(&rank, &version, &typ, &success); err != nil {
			return state{}, fmt.Errorf("reading %s: %w", t.name, err)
		}
		if !success {
			st.Dirty = true
			v := "(repeatable)"
			if version != nil {
				v = *version
			}
			st.Notes = append(st.Notes, fmt.Sprintf("%s row %d (version %s) failed: the database is dirty until the damage is repaired and `flyway repair` removes the row", t.name, rank, v))
			continue
		}
		if version == nil {
			continue // a repeatable migration
		}
		v := strings.ReplaceAll(strings.TrimSpace(*version), "_", ".")
		key := schemaversion.Canonical(v)
		if typ == "DELETE" || strings.HasPrefix(typ, "UNDO_") {
			delete(applied, key)
			continue
		}
		if _, seen := applied[key]; !seen {
			order = append(order, key)
		}
		applied[key] = row{version: v, rank: rank}
	}
	if err := rows.Err(); err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	for _, key := range order {
		r, ok := applied[key]
		if !ok {
			continue
		}
		if err := checkVersion(r.version, fmt.Sprintf("%s version (installed_rank %d)", t.name, r.rank)); err != nil {
			return state{}, err
		}
		if higher(r.version, st.Version) {
			st.Version = r.version
		}
	}
	if st.Version == "" {
		st.Version = "0"
		st.Notes = append(st.Notes, t.name+" has no successful versioned migration: reporting version 0")
	}
	return st, nil
}
