/* @rpath/libompuser.dylib: a library of the application that itself calls into
 * libomp (__kmpc_barrier), so a model that needs it depends on libomp indirectly. */
void __kmpc_barrier(void *loc, int gtid);
void *malloc(unsigned long);

int ompuser_run(void) { __kmpc_barrier(malloc(1), 0); return 0; }
