package main

import (
	"context"
	"fmt"
	"strconv"
)

// readGolangMigrate reads golang-migrate's table (schema_migrations: version bigint, dirty
// boolean), which holds at most one row. No table or no row: version 0. golang-migrate writes
// version -1 with dirty = true when going down from the first migration fails: version 0, dirty.
func readGolangMigrate(ctx context.Context, q querier, w target) (state, error) {
	t, ok, err := findTable(ctx, q, w.schema, w.table)
	if err != nil || !ok {
		return noTable(w.schema, w.table), err
	}
	rows, err := q.Query(ctx, "SELECT version, dirty FROM "+t.ident+" LIMIT 2")
	if err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	defer rows.Close()
	var versions []int64
	var dirty bool
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v, &dirty); err != nil {
			return state{}, fmt.Errorf("reading %s: %w", t.name, err)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	switch {
	case len(versions) == 0:
		return state{Version: "0", Notes: []string{t.name + " is empty: reporting version 0"}}, nil
	case len(versions) > 1:
		return state{}, fmt.Errorf("%s has more than one row; golang-migrate keeps exactly one, so the version is unknown", t.name)
	}
	v := versions[0]
	st := state{Version: strconv.FormatInt(v, 10), Dirty: dirty}
	if v == -1 && dirty {
		st.Version = "0"
	}
	if err := checkVersion(st.Version, t.name+" version"); err != nil {
		return state{}, err
	}
	if dirty {
		st.Notes = append(st.Notes, fmt.Sprintf("%s is dirty at version %d: a migration failed half-way; repair the database by hand, then clear the flag (migrate force %d)", t.name, v, v))
	}
	return st, nil
}
