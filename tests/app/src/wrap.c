/* Wrap.framework: its own symbol, plus libinner re-exported. */
int wrap_fn(int x) { return x * 2; }
