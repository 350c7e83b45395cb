/* An OpenMP runtime as an application ships it (names as LLVM's libomp exports
 * them). OMP_PARTIAL builds the "partial" one that lacks __kmpc_barrier. */
void *malloc(unsigned long);

static int threads = 1;

int omp_get_num_threads(void) { return threads; }
int omp_get_thread_num(void) { return 0; }
int omp_get_max_threads(void) { return threads; }
void __kmpc_fork_call(void *loc, int argc, void (*microtask)(int *, int *)) {
    int gtid = 0, btid = 0;
    (void)loc; (void)argc;
    microtask(&gtid, &btid);
}
#ifndef OMP_PARTIAL
void __kmpc_barrier(void *loc, int gtid) { (void)loc; (void)gtid; }
#endif
void *__kmp_internal_alloc(unsigned long size) { return malloc(size); }
