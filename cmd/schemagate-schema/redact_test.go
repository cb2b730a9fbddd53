package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// secret is a wrong password with characters that URLs and key/value strings escape or quote.
const secret = `Wr0ng p@ss:w/rd%&x=y'q`

// spellings are the ways secret can appear in text: raw, and escaped as URLs do.
func spellings(p string) []string {
	return []string{p, url.QueryEscape(p), url.PathEscape(p), strings.TrimPrefix(url.UserPassword("", p).String(), ":"),
		strings.ReplaceAll(url.QueryEscape(p), "+", "%20")}
}

// leaks returns the spellings of p found in text.
func leaks(text, p string) []string {
	var found []string
	for _, s := range spellings(p) {
		if strings.Contains(text, s) {
			found = append(found, s)
		}
	}
	return found
}

// secretURL is a URL for pwUser with password p, to host:port.
func secretURL(p string, port int) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pwUser, p), Host: fmt.Sprintf("127.0.0.1:%d", port),
		Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// keyValueQuote quotes a value of a key/value connection string.
func keyValueQuote(p string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p) + "'"
}

func TestRedactor(t *testing.T) {
	for _, p := range []string{secret, "hunter2", "a+b c", `back\slash`, "ünï©ødé"} {
		escaped := strings.TrimPrefix(url.UserPassword("", p).String(), ":")
		for _, conn := range []string{
			secretURL(p, 5432),
			"postgresql://app:" + escaped + "@db.example:5432/shop?sslmode=require",
			"postgres://db.example/shop?user=app&password=" + url.QueryEscape(p),
			"host=db.example user=app password=" + keyValueQuote(p) + " dbname=shop",
		} {
			r := newRedactor(conn)
			// Messages quoting the password in every spelling, the whole connection string, and
			// the forms pgx and others write.
			var msg strings.Builder
			for _, s := range spellings(p) {
				fmt.Fprintf(&msg, "[%s] ", s)
			}
			fmt.Fprintf(&msg, "cannot parse `%s`: invalid port; password=%s; password = %s; postgres://app:%s@host",
				conn, p, keyValueQuote(p), p)
			got := r.Redact(msg.String())
			if l := leaks(got, p); len(l) > 0 {
				t.Errorf("password %q in %q: the redacted text still has %q:\n%s", p, conn, l, got)
			}
			if !strings.Contains(got, redacted) {
				t.Errorf("nothing redacted in %s", got)
			}
		}
	}

	// Text without a password is left alone, even where it says "password".
	r := newRedactor("postgres://app@db/shop")
	for _, s := range []string{
		`failed SASL auth: FATAL: password authentication failed for user "app" (SQLSTATE 28P01)`,
		"dial tcp 127.0.0.1:1: connect: connection refused",
	} {
		if got := r.Redact(s); got != s {
			t.Errorf("Redact(%q) = %q", s, got)
		}
	}

	// A password given apart from the URL (PGPASSWORD, ~/.pgpass) is redacted too.
	r = newRedactor("postgres://app@db/shop", "from-pgpass")
	if got := r.Redact("wrong: from-pgpass"); strings.Contains(got, "from-pgpass") {
		t.Errorf("got %q", got)
	}
}

func TestLoggerRedacts(t *testing.T) {
	var out strings.Builder
	newLogger(&out, newRedactor(secretURL(secret, 1))).printf("connecting to %s: %s", secretURL(secret, 1), secret)
	if l := leaks(out.String(), secret); len(l) > 0 || !strings.HasPrefix(out.String(), progName+": ") {
		t.Errorf("logged %q (leaks %q)", out.String(), l)
	}
}

// TestPasswordNeverPrinted runs the binary against the real server with a wrong password, and
// against a closed port, in each way a password can be given, and checks stdout and stderr.
func TestPasswordNeverPrinted(t *testing.T) {
	port := pg.Port()
	closed := closedPort(t)
	cases := []struct {
		name string
		env  []string
		want string // in stderr: proof the attempt was real
	}{
		{"wrong_password_url", []string{"DATABASE_URL=" + secretURL(secret, port)}, "password authentication failed"},
		{"wrong_password_key_value", []string{fmt.Sprintf("DATABASE_URL=host=127.0.0.1 port=%d user=%s dbname=postgres sslmode=disable password=%s",
			port, pwUser, keyValueQuote(secret))}, "password authentication failed"},
		{"wrong_password_query", []string{fmt.Sprintf("DATABASE_URL=postgres://%s@127.0.0.1:%d/postgres?sslmode=disable&password=%s",
			pwUser, port, url.QueryEscape(secret))}, "password authentication failed"},
		{"wrong_password_pgpassword", []string{fmt.Sprintf("DATABASE_URL=postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", pwUser, port),
			"PGPASSWORD=" + secret}, "password authentication failed"},
		{"unreachable_port_url", []string{"DATABASE_URL=" + secretURL(secret, closed)}, "connection refused"},
		{"unreachable_port_key_value", []string{fmt.Sprintf("DATABASE_URL=host=127.0.0.1 port=%d user=%s password=%s",
			closed, pwUser, keyValueQuote(secret))}, "connection refused"},
		{"unparsable_url", []string{"DATABASE_URL=postgres://" + pwUser + ":" + strings.TrimPrefix(url.UserPassword("", secret).String(), ":") + "@127.0.0.1:notaport/postgres"}, "cannot be used"},
	}
	// A password written into a URL without escaping: the URL parser's message would quote the
	// part of it before the '/' (found by a new user's trial).
	unescaped := "Hunter2%/xyz"
	cases = append(cases, struct {
		name string
		env  []string
		want string
	}{"unescaped_percent_in_url", []string{"DATABASE_URL=postgres://app:" + unescaped + "@127.0.0.1:5432/shop"}, "cannot be used"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			secret := secret
			if c.name == "unescaped_percent_in_url" {
				secret = unescaped
			}
			for _, command := range [][]string{
				{"report", "--tool", "goose", "--report-path", "-"},
				{"run", "--tool", "flyway", "--report-path", "-", "--", "true"},
			} {
				r := runBinary(t, c.env, command...)
				if r.code == exitClean || !strings.Contains(r.stderr, c.want) {
					t.Fatalf("%s: exit %d; want a failure with %q in stderr:\n%s", command[0], r.code, c.want, r.stderr)
				}
				if l := leaks(r.stdout+r.stderr, secret); len(l) > 0 {
					t.Errorf("%s printed the password as %q:\n%s%s", command[0], l, r.stdout, r.stderr)
				}
				if strings.Contains(r.stdout+r.stderr, "Hunter2") {
					t.Errorf("%s printed part of the password:\n%s%s", command[0], r.stdout, r.stderr)
				}
			}
		})
	}

	// The right password works, so the wrong one failed for being wrong.
	t.Run("right_password", func(t *testing.T) {
		r := runBinary(t, []string{"DATABASE_URL=" + secretURL(pwUserPassword, port)}, "report", "--tool", "goose", "--report-path", "-")
		if r.code != exitClean {
			t.Fatalf("exit %d:\n%s", r.code, r.stderr)
		}
	})
}
