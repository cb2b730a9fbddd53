package probe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the pgx database/sql driver goose runs on
	"github.com/pressly/goose/v3"
)

// golangMigrate is golang-migrate on the scratch database.
type golangMigrate struct{ m *migrate.Migrate }

func newGolangMigrate(files fs.FS, url string) (*golangMigrate, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return nil, fmt.Errorf("reading the golang-migrate migrations: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, withScheme(url, "pgx5://"))
	if err != nil {
		return nil, fmt.Errorf("opening the scratch database with golang-migrate: %w", err)
	}
	return &golangMigrate{m: m}, nil
}

func (g *golangMigrate) upTo(ctx context.Context, v int64) error {
	stop := context.AfterFunc(ctx, func() { g.m.GracefulStop <- true })
	defer stop()
	err := g.m.Migrate(uint(v))
	if errors.Is(err, migrate.ErrNoChange) {
		return nil
	}
	var dirty migrate.ErrDirty
	if errors.As(err, &dirty) {
		return fmt.Errorf("golang-migrate: the database is dirty at version %d: a migration failed half-way", dirty.Version)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("golang-migrate: no migration %d in the migrations: %w", v, err)
	}
	if err != nil {
		if version, dirty, verr := g.m.Version(); verr == nil && dirty {
			return fmt.Errorf("golang-migrate: %w; it marked the scratch database dirty at version %d", err, version)
		}
		return fmt.Errorf("golang-migrate: %w", err)
	}
	return nil
}

func (g *golangMigrate) close() { g.m.Close() }

// gooseTool is goose on the scratch database.
type gooseTool struct {
	db *sql.DB
	p  *goose.Provider
}

func newGoose(files fs.FS, url string) (*gooseTool, error) {
	db, err := sql.Open("pgx", withScheme(url, "postgres://"))
	if err != nil {
		return nil, fmt.Errorf("opening the scratch database for goose: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("reading the goose migrations: %w", err)
	}
	return &gooseTool{db: db, p: p}, nil
}

func (g *gooseTool) upTo(ctx context.Context, v int64) error {
	if _, err := g.p.UpTo(ctx, v); err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	now, err := g.p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("goose: reading the version: %w", err)
	}
	if now != v {
		return fmt.Errorf("goose: the migrations end at version %d, not %d", now, v)
	}
	return nil
}

func (g *gooseTool) close() {
	g.p.Close()
	g.db.Close()
}

func withScheme(u, scheme string) string {
	for _, s := range []string{"postgres://", "postgresql://", "pgx5://"} {
		if rest, ok := strings.CutPrefix(u, s); ok {
			return scheme + rest
		}
	}
	return u
}
