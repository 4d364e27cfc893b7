/* The config tests' temporary files (test-config's gw_config_load,
 * test-config-paths' check_paths): a directory of our own with three
 * empty files in it, made by setup_tmp and removed by teardown_tmp
 * (cmocka's setup and teardown: the test's state is the struct tmp).
 */
#ifndef HHC_TEST_CONFIGTMP_H
#define HHC_TEST_CONFIGTMP_H

struct tmp {
  char dir[64];     /* a directory of our own */
  char file[3][96]; /* three files in it */
};

int setup_tmp (void **state);
int teardown_tmp (void **state);

#endif /* HHC_TEST_CONFIGTMP_H */
