package main

import (
	"context"
	"fmt"
	"strings"
)

// atlasBaseline is the bit of atlas_schema_revisions.type that marks a baseline revision.
const atlasBaseline = 1

// readAtlas reads Atlas's revisions table (atlas_schema_revisions.atlas_schema_revisions:
// version, type, applied, total, error, …). The version is the highest one, compared as numbers
// (Atlas's are usually timestamps like 20260101120000), among the revisions fully applied
// (applied = total) without an error; a baseline revision (type 1) counts as applied. A revision
// with applied < total or an error makes the database dirty (Atlas stops there until the
// revision is fixed, e.g. with `atlas migrate set`). No table: version 0.
func readAtlas(ctx context.Context, q querier, w target) (state, error) {
	t, ok, err := findTable(ctx, q, w.schema, w.table)
	if err != nil || !ok {
		return noTable(w.schema, w.table), err
	}
	rows, err := q.Query(ctx, "SELECT version, coalesce(type, 0), coalesce(applied, 0), coalesce(total, 0), coalesce(error, '') FROM "+t.ident+" ORDER BY version")
	if err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	defer rows.Close()
	var st state
	for rows.Next() {
		var version, errText string
		var typ, applied, total int64
		if err := rows.Scan(&version, &typ, &applied, &total, &errText); err != nil {
			return state{}, fmt.Errorf("reading %s: %w", t.name, err)
		}
		if typ&atlasBaseline == 0 && (applied < total || strings.TrimSpace(errText) != "") {
			st.Dirty = true
			st.Notes = append(st.Notes, fmt.Sprintf("%s revision %s is partly applied (%d of %d statements) or failed: the database is dirty", t.name, version, applied, total))
			continue
		}
		if err := checkVersion(version, t.name+" version"); err != nil {
			return state{}, err
		}
		if higher(version, st.Version) {
			st.Version = version
		}
	}
	if err := rows.Err(); err != nil {
		return state{}, fmt.Errorf("reading %s: %w", t.name, err)
	}
	if st.Version == "" {
		st.Version = "0"
		st.Notes = append(st.Notes, t.name+" has no applied revision: reporting version 0")
	}
	return st, nil
}
