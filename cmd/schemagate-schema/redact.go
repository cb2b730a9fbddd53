package main

import (
	"cmp"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// redacted replaces a password in printed text.
const redacted = "xxxxx"

var (
	// keyValuePassword matches password=VALUE in a key/value connection string ("host=db
	// password='a b'") or a URL query ("?password=x&sslmode=require"): VALUE is single-quoted
	// (backslash escapes) or runs to a space or '&'.
	keyValuePassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]+)`)
	// urlUserinfo matches the password of a URL's user information: scheme://user:PASSWORD@.
	// Greedy up to the last '@' of the word, so a password with an unescaped '@' is covered.
	urlUserinfo = regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^:/?#@\s]*:)\S*@`)
)

// redactor removes a database password from text before it is printed: pgx's errors can quote
// parts of the connection string, and nothing this program prints may show the password.
type redactor struct {
	// secrets are the password's spellings, longest first.
	secrets []string
}

// newRedactor knows the password of connString (a URL or a key/value string, parsed here
// without pgx so that even a string pgx rejects is covered) and any further passwords given
// (PGPASSWORD, the one pgx resolved). It replaces each of them wherever it appears, raw and
// URL-escaped, plus anything that looks like password=VALUE or scheme://user:VALUE@.
func newRedactor(connString string, passwords ...string) *redactor {
	var found []string
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		if p, ok := u.User.Password(); ok {
			found = append(found, p)
		}
		if q, err := url.ParseQuery(u.RawQuery); err == nil {
			found = append(found, q["password"]...)
		}
	}
	// The spellings as written, escaped or not, and unescaped where possible.
	for _, m := range urlUserinfo.FindAllString(connString, -1) {
		p := m[strings.Index(m, "://")+3:]
		p = strings.TrimSuffix(p[strings.IndexByte(p, ':')+1:], "@")
		found = append(found, p)
		if u, err := url.PathUnescape(p); err == nil {
			found = append(found, u)
		}
	}
	for _, m := range keyValuePassword.FindAllStringSubmatch(connString, -1) {
		v := m[2]
		found = append(found, v)
		if strings.HasPrefix(v, "'") {
			found = append(found, unquoteKeyValue(v))
		} else if u, err := url.QueryUnescape(v); err == nil {
			found = append(found, u)
		}
	}
	found = append(found, passwords...)

	r := &redactor{}
	for _, p := range found {
		if p == "" {
			continue
		}
		r.secrets = append(r.secrets, p, url.QueryEscape(p), url.PathEscape(p),
			strings.ReplaceAll(url.QueryEscape(p), "+", "%20"),
			strings.TrimPrefix(url.UserPassword("", p).String(), ":"))
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	r.secrets = slices.Compact(r.secrets)
	return r
}

// unquoteKeyValue undoes the quoting of a key/value connection string value: 'it\'s' → it's.
func unquoteKeyValue(v string) string {
	v = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// minSubstring is the shortest password replaced wherever it occurs in a message, even inside
// other words (a garbled message is better than a leaked secret). A shorter one ("a", "pw")
// would turn every message into noise and, by the pattern of what was replaced, give itself
// away; it is still removed wherever it stands as a password (password=…, a URL's user
// information), and pgx's messages never quote a password otherwise.
const minSubstring = 4

// Redact returns s without the password.
func (r *redactor) Redact(s string) string {
	for _, p := range r.secrets {
		if len(p) >= minSubstring {
			s = strings.ReplaceAll(s, p, redacted)
		}
	}
	s = keyValuePassword.ReplaceAllString(s, "${1}"+redacted)
	return urlUserinfo.ReplaceAllString(s, "${1}"+redacted+"@")
}

// logger prints this program's messages to stderr, redacted, each prefixed with its name.
type logger struct {
	w      io.Writer
	redact *redactor
}

func newLogger(w io.Writer, r *redactor) *logger { return &logger{w: w, redact: r} }

func (l *logger) printf(format string, args ...any) {
	msg := l.redact.Redact(fmt.Sprintf(format, args...))
	if !strings.HasPrefix(msg, progName) {
		msg = progName + ": " + msg
	}
	fmt.Fprintln(l.w, msg)
}
