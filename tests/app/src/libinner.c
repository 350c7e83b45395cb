/* @rpath/libinner.dylib: re-exported by Wrap.framework (LC_REEXPORT_DYLIB). */
int inner_fn(int x) { return x + 1; }
