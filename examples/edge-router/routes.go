package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"math"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// routeQueries is what each schema version's text binary selects (the region set's migrations).
// The schema-2 binary reads a column that only migration 2 adds: on a schema-1 database its every
// load fails — the incident.
var routeQueries = map[int]string{
	1: `SELECT domain, upstream, '' FROM routes`,
	2: `SELECT domain, upstream, region FROM routes`,
}

type route struct{ Upstream, Region string }

// jsonTarget is a route's target as the JSON binary reads it: {"url": "http://…"}.
type jsonTarget struct {
	URL    string `json:"url"`
	Region string `json:"region"`
}

// validTarget says whether target is an upstream the router can send to: an absolute http or
// https URL with a host. A row whose target is not (the text binary reading a column that became
// JSON) is skipped, so its domain answers 404, and counted in edge_router_invalid_routes.
func validTarget(target string) bool {
	u, err := url.Parse(target)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// table is the router's view of the database: the route table it serves and the schema it saw.
type table struct {
	cfg serveConfig

	mu          sync.RWMutex
	routes      map[string]route
	loadedAt    time.Time // last successful load; zero before the first
	loadErrors  int
	invalid     int // rows of the last successful load whose target was not a valid upstream
	dbSchema    int // schema_migrations.version as last read; 0: no table or no row
	dbDirty     bool
	schemaKnown bool // dbSchema and dbDirty come from a successful read
}

// refresh checks the schema and reloads the routes, now and every cfg.Refresh, until ctx ends.
func (t *table) refresh(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Refresh)
	defer tick.Stop()
	failing := false
	for {
		// Log the changes only: the first failure and the recovery, not every attempt.
		err := t.reload(ctx)
		switch {
		case err != nil && !failing:
			log.Printf("route load failed (retrying every %s): %v", t.cfg.Refresh, err)
		case err == nil && failing:
			log.Printf("route load succeeded again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// reload does one round on a fresh connection (so a restarted database is simply picked up again).
func (t *table) reload(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL(t.cfg.DatabaseURL))
	if err == nil {
		defer conn.Close(context.Background())
		t.readSchema(ctx, conn)
		var routes map[string]route
		var invalid int
		if routes, invalid, err = load(ctx, conn, t.cfg); err == nil {
			loseEveryNth(routes, t.cfg.LoseRoutes)
			t.mu.Lock()
			if invalid > 0 && t.invalid == 0 {
				log.Printf("%d routes have a target that is not an http(s) URL: they answer 404", invalid)
			}
			t.routes, t.loadedAt, t.invalid = routes, time.Now(), invalid
			t.mu.Unlock()
			return nil
		}
	}
	t.mu.Lock()
	t.loadErrors++
	if t.cfg.CachePolicy == policyFailEmpty {
		t.routes = nil // the incident's behaviour: a failed load leaves nothing to route with
	}
	t.mu.Unlock()
	return err
}

// loseEveryNth drops every nth domain of routes in sorted order (n ≤ 0: none): the test aid
// --lose-every-nth-route.
func loseEveryNth(routes map[string]route, n int) {
	if n <= 0 {
		return
	}
	domains := slices.Sorted(maps.Keys(routes))
	for i := n - 1; i < len(domains); i += n {
		delete(routes, domains[i])
	}
}

// load reads the route table the way cfg's binary does. A row whose target it cannot use is left
// out (its domain answers 404) and counted in invalid; the load itself still succeeds, so the
// cache policy never sees it: that is what a binary does that reads a format it does not know.
func load(ctx context.Context, conn *pgx.Conn, cfg serveConfig) (routes map[string]route, invalid int, err error) {
	col := pgx.Identifier{cfg.TargetColumn}.Sanitize()
	query := `SELECT domain, ` + col + `::text, '' FROM routes`
	switch {
	case cfg.TargetFormat == formatText && cfg.TargetColumn == defaultTargetColumn[formatText]:
		query = routeQueries[cfg.Schema]
	case cfg.TargetFormat == formatJSON:
		query = `SELECT domain, ` + col + `, '' FROM routes`
	}
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, 0, err
	}
	routes = map[string]route{}
	var domain string
	var r route
	var doc []byte
	dest := []any{&domain, &r.Upstream, &r.Region}
	if cfg.TargetFormat == formatJSON {
		dest[1] = &doc
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if cfg.TargetFormat == formatJSON {
			var t jsonTarget
			if json.Unmarshal(doc, &t) != nil {
				invalid++
				return nil
			}
			r = route{Upstream: t.URL, Region: t.Region}
		}
		if !validTarget(r.Upstream) {
			invalid++
			return nil
		}
		routes[domain] = r
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return routes, invalid, nil
}

// readSchema records golang-migrate's version and dirty flag. A missing table means version 0.
// Any other error leaves the last reading in place: a database outage is the cache policy's
// business, not a reason to stop being ready.
func (t *table) readSchema(ctx context.Context, conn *pgx.Conn) {
	var version int
	var dirty bool
	err := conn.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations LIMIT 1`).Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		version, dirty = 0, false
	case err != nil:
		return
	}
	t.mu.Lock()
	t.dbSchema, t.dbDirty, t.schemaKnown = version, dirty, true
	t.mu.Unlock()
}

// served is the table requests are answered from (the caller holds t.mu): under fail-empty,
// nothing once it is older than the TTL; under fail-static, the last good table however old.
func (t *table) served() map[string]route {
	if t.cfg.CachePolicy == policyFailEmpty && time.Since(t.loadedAt) > t.cfg.CacheTTL {
		return nil
	}
	return t.routes
}

func (t *table) lookup(host string) (route, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.served()[host]
	return r, ok
}

// ageSeconds is how long ago the last successful load was (+Inf before the first).
func (t *table) ageSeconds() float64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.loadedAt.IsZero() {
		return math.Inf(1)
	}
	return time.Since(t.loadedAt).Seconds()
}

func (t *table) stats() (size, loadErrors, dbSchema int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.served()), t.loadErrors, t.dbSchema
}

// invalidRoutes is how many rows of the last successful load had a target the router cannot use.
func (t *table) invalidRoutes() float64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return float64(t.invalid)
}

// notReady says why /ready must refuse, or "" when it may succeed.
func (t *table) notReady() string {
	if !t.cfg.CheckSchema {
		return "" // the original binary: ready as soon as it listens
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	switch {
	case !t.schemaKnown:
		return "database schema not read yet"
	case t.dbDirty && t.dbSchema <= t.cfg.Schema:
		// golang-migrate marks version n dirty while migration n runs, and leaves it so when n
		// fails half-way; every version below n is complete. Only a binary that needs n or more
		// depends on what n did.
		return fmt.Sprintf("database schema %d is dirty (a migration is running or failed half-way), and this binary needs %d", t.dbSchema, t.cfg.Schema)
	case t.dbSchema < t.cfg.Schema:
		return fmt.Sprintf("database schema is %d, this binary needs %d", t.dbSchema, t.cfg.Schema)
	case t.loadedAt.IsZero():
		return "no route load has succeeded yet"
	}
	return ""
}
