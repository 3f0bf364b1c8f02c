package risk

import "testing"

func TestClassify(t *testing.T) {
	tests := []struct {
		line string
		want Class
	}{
		// Failures in the spellings docs/EDGES.md #18 lists, and their relatives.
		{"ERROR: build failed", Error},
		{"error: cannot find symbol", Error},
		{"3 failed, 10 passed in 2.1s", Error},
		{"FAILED tests/test_x.py::test_y - AssertionError", Error},
		{"--- FAIL: TestThing (0.00s)", Error},
		{"fatal: not a git repository", Error},
		{"npm ERR! code ELIFECYCLE", Error},
		{"Segmentation fault (core dumped)", Error},
		{"bash: /root/x: Permission denied", Error},
		{"  ✗ should render", Error},
		{"Traceback (most recent call last):", Error},
		{"ModuleNotFoundError: No module named 'django'", Error},
		{"java.lang.NullPointerException", Error},
		{"panic: runtime error: index out of range", Error},
		{"thread 'main' panicked at src/main.rs:2:5", Error},
		{"Command exited with code 2", Error},
		{"<returncode>1</returncode>", Error},
		{"subprocess returned non-zero exit status 1", Error},
		{"cat: foo.txt: No such file or directory", Error},
		{"bash: pytest: command not found", Error},
		{"Error: ENOENT: no such file", Error},
		{"listen EADDRINUSE :::3000", Error},
		{"Killed", Error},
		{"request timed out after 30s", Error},
		{"CONFLICT (content): Merge conflict in a.go", Error},
		{"AssertionError: expected 1", Error},
		{"Aborted", Error},
		// Warnings.
		{"warning: unused variable `x`", Warning},
		{"DeprecationWarning: use new_api", Warning},
		{"npm WARN deprecated request@2.88", Warning},
		// Ordinary lines, zero counts and code identifiers.
		{"Ran 12 tests in 0.3s", None},
		{"OK", None},
		{"0 failed, 12 passed", None},
		{"no errors found", None},
		{"errors: 0", None},
		{"failures=0", None},
		{"exit code 0", None},
		{"Exit status: 0", None},
		{"        errors.append(e)", None},
		{"    self.failures = []", None},
		{"  if err != nil {", None},
		{"stderr output follows", None},
		{"onError handler registered", None},
		{"mirror the terror of error-free code", Error}, // "error" as a word still counts
		// Source code in file listings names failures without reporting one.
		{"        raise ValueError(\"Inconsistent number of columns\")", None},
		{"    except ImportError:", None},
		{"class NoConvergence(Exception):", None},
		{"  } catch (error: any) {", None},
		{"  // If message was aborted or errored, mark tools as failed", None},
		{"    # raise an error when the file is missing", None},
		{"     * @throws {Error} when the token is invalid", None},
		{"WcsError = _wcs.WcsError", None},
		{"this.showError(`Failed to load models: ${error}`);", None},
		{"    'InconsistentAxisTypesError', 'InvalidTransformError',", None},
		{"   412\t        raise ImproperlyConfigured(\"error\")", None},
		{"  58 |     throw new Error('boom');", None},
		{"if (assistantMsg.stopReason === \"error\") {", None},
		{"const error = new Error(message)", None},
		{"for more information about this error, try `rustc --explain E0308`", None},
		{"1585-        with self.assertRaisesMessage(CommandError, msg):", None},
		{"7:from django.core.exceptions import NON_FIELD_ERRORS, ValidationError", None},
		{"+            except UnicodeDecodeError:", None},
		{"- If a hook throws an error, it is logged", Error},
		{"2-3 errors occurred", Error},
		{"	error: ColorValueSchema,", None},
		// ... while output that quotes code or starts like it still counts.
		{"src/a.ts(3,5): error TS2322: Type 'boolean' is not assignable to type '(text: string) => string'.", Error},
		{"E       AssertionError: assert 1 == 2", Error},
		{"* Failed to start the server", Error},
		{"Error: x == y failed", Error},
		{"ValueError: Inconsistent number of columns", Error},
		{"12 failed, 3 passed in 0.31s", Error},
		{"error[E0308]: mismatched types", Error},
		{"", None},
	}
	for _, tt := range tests {
		if got := Classify(tt.line); got != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.line, got, tt.want)
		}
	}
}

func TestLines(t *testing.T) {
	text := "ok\nwarning: w\nERROR: e\n\nfine"
	got := Lines(text, Warning)
	if len(got) != 2 || got[0].Index != 1 || got[0].Class != Warning || got[1].Index != 2 || got[1].Class != Error {
		t.Fatalf("Lines = %+v", got)
	}
	if got := Lines(text, Error); len(got) != 1 || got[0].Text != "ERROR: e" {
		t.Fatalf("Lines(Error) = %+v", got)
	}
	if !Has(text, Error) || Has("all good\n", Warning) {
		t.Fatal("Has")
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("exit code 12 and ERROR ✗")
	f.Fuzz(func(t *testing.T, s string) {
		c := Classify(s)
		if c > Error {
			t.Fatal("bad class")
		}
		_ = Lines(s, Warning)
	})
}

func BenchmarkClassifyMegabyte(b *testing.B) {
	line := "    at Object.<anonymous> (/srv/app/node_modules/lib/index.js:12:7) something happened here\n"
	text := ""
	for len(text) < 1<<20 {
		text += line
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Lines(text, Warning)
	}
}
