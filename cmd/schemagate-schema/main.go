// Command schemagate-schema reports the schema version of a PostgreSQL database as a schema
// report (docs/schema-report.md), the evidence schemagate reads from a Job pod's termination
// message. It reads the table a migration tool keeps (golang-migrate, goose, Flyway, Atlas,
// Liquibase); `run` wraps the user's own migration command and reports after it, failed runs
// included. See docs/schemagate-schema.md and `schemagate-schema --help`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes. For run, a non-zero exit code of the command wins over all of these.
const (
	exitClean    = 0 // report written, the database is clean
	exitUsage    = 1 // usage error; nothing was run or read
	exitNoReport = 2 // could not connect or read: nothing written to the report path
	exitDirty    = 3 // report written, the database is dirty
	exitBelow    = 4 // report only: report written, the database is clean but below --require
)

const progName = "schemagate-schema"

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// realMain runs the command line args and returns the exit code.
func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "%s: a command is required: report or run; see %s --help\n", progName, progName)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, helpText)
		return exitClean
	case "probe":
		return runProbe(args[1:], stdout, stderr, getenv)
	case "report", "run":
	default:
		fmt.Fprintf(stderr, "%s: unknown command %q: want report, run or probe; see %s --help\n", progName, args[0], progName)
		return exitUsage
	}
	cfg, err := parseArgs(args[0], args[1:], getenv)
	switch {
	case err == errHelp:
		fmt.Fprint(stdout, helpText)
		return exitClean
	case err != nil:
		// Flags never carry the URL, but the message goes through the redactor all the same
		// once there is one (parseArgs has already built it when the URL failed to parse).
		log := newLogger(stderr, cfg.redact)
		log.printf("%s %s: %v; see %s --help", progName, args[0], err, progName)
		return exitUsage
	}
	log := newLogger(stderr, cfg.redact)

	if cfg.command == "run" {
		return runAndReport(cfg, stdin, stdout, stderr, log)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return report(ctx, cfg, stdout, log)
}
