/* A model linked against Wrap.framework: wrap_fn is Wrap's own, inner_fn reaches it
 * through Wrap's LC_REEXPORT_DYLIB of libinner (the import names Wrap's ordinal). */
void *malloc(unsigned long);
int wrap_fn(int);
int inner_fn(int);

int AOTInductorModelContainerRun(void) { return wrap_fn(inner_fn(malloc(1) != 0)); }
