package proxy

// panicAtStep makes the cut-through panic at step ("write", "read" or
// "decide") on every request, to show that it fails open, until the
// returned function restores the hooks.
func panicAtStep(step string) (restore func()) {
	return setHooks(func(h *testHooks) {
		h.cut = func(s string) {
			if s == step {
				panic("test panic at " + s)
			}
		}
	})
}

// watchEvents calls f with each event the proxy reports to its hooks,
// until the returned function restores them.
func watchEvents(f func(event string)) (restore func()) {
	return setHooks(func(h *testHooks) { h.event = f })
}

// setHooks installs a copy of the current hooks changed by edit.
func setHooks(edit func(*testHooks)) (restore func()) {
	old := hooks.Load()
	h := &testHooks{}
	if old != nil {
		*h = *old
	}
	edit(h)
	hooks.Store(h)
	return func() { hooks.Store(old) }
}
