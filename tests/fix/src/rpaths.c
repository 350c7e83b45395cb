/* A dylib whose only point is its LC_RPATHs (the duplicate-rpath fixtures). It
 * imports malloc so that its one dependency, libSystem, supplies a symbol. */
void *malloc(unsigned long);

void *rpath_holder(void) { return malloc(1); }
