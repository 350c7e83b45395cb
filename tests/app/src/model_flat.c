/* A plugin linked with -undefined dynamic_lookup: the N-API functions come from the
 * host executable, bzero from whatever loaded image exports it (libSystem). */
void *malloc(unsigned long);
int napi_create_function(void *env, const char *name);
int napi_get_cb_info(void *env, void *info);
void bzero(void *p, unsigned long n);

int plugin_init(void *env) {
    void *p = malloc(8);
    bzero(p, 8);
    return napi_create_function(env, "f") + napi_get_cb_info(env, p);
}
