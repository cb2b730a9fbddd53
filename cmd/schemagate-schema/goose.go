package main

import (
	"context"
	"fmt"
	"strconv"
)

// readGoose reads goose's table (goose_db_version: id, version_id bigint, is_applied boolean,
// tstamp) the way goose finds its current version: newest row first, a row with is_applied =
// false marks its version as rolled back (older applied rows of that version no longer count),
// and the first applied row not rolled back is the version. goose's first row is version 0; no
// table: 0. goose has no dirty flag: a failed migration leaves the last good version.
func readGoose(ctx context.Context, q querier, w target) (state, error) {
	t, ok, err := findTable(ctx, q, w.schema, w.table)
	if err != nil || !ok {
		return noTable(w.schema, w.table), err
	}
	rows, err := q.Query(ctx, "SELECT version_id, is_applied FROM "+t.ident+" ORDER BY id DESC")
	if err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	defer rows.Close()
	rolledBack := map[int64]bool{}
	for rows.Next() {
		var v int64
		var applied bool
		if err := rows.Scan(&v, &applied); err != nil {
			return state{}, fmt.Errorf("reading %s: %w", t.name, err)
		}
		switch {
		case rolledBack[v]:
		case applied:
			version := strconv.FormatInt(v, 10)
			if err := checkVersion(version, t.name+" version_id"); err != nil {
				return state{}, err
			}
			return state{Version: version}, nil
		default:
			rolledBack[v] = true
		}
	}
	if err := rows.Err(); err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	return state{Version: "0", Notes: []string{t.name + " has no applied version: reporting version 0"}}, nil
}
