package rollout

import "testing"

// A count of restarts reads as English: "restarted once", never "restarted 1 times".
func TestTimes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 times", 1: "once", 2: "twice", 3: "3 times", 12: "12 times"} {
		if got := times(n); got != want {
			t.Errorf("times(%d) = %q, want %q", n, got, want)
		}
	}
}
