/* @rpath/libmid.dylib: shipped by the application, but its own dependency
 * (@rpath/libgone.dylib) is not. */
int gone_fn(int);
void *malloc(unsigned long);

int mid_run(int x) { return gone_fn(x) + (malloc(1) != 0); }
