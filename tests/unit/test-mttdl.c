/* The MTTDL model of hhcctl mttdl (appliance/mttdl.c): the numeric
 * solution of each Markov chain against its exact solution where one
 * is known and against the closed-form approximation, the paper's
 * ordering for hhcctl's defaults, and bad arguments.
 */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mttdl.h"

/* hhcctl mttdl's defaults (man/hhcctl.pod). */
#define DEF_DISKS 4
#define DEF_HDD 500000.0
#define DEF_SSD 2000000.0
#define DEF_MTTR 24.0

struct params {
  unsigned disks, logs;
  double hdd, ssd, mttr;
};

/* MTTR << MTTF in every set (at most 1/2000). */
static const struct params sets[] = {
  { 4, 1, 500000, 2000000, 24 },  { 4, 2, 500000, 2000000, 24 },
  { 6, 1, 1000000, 1500000, 12 }, { 8, 2, 2500000, 2000000, 72 },
  { 5, 3, 300000, 1000000, 6 },   { 4, 4, 800000, 3000000, 48 },
  { 12, 1, 2000000, 500000, 24 }, { 3, 2, 150000, 600000, 1 },
};

static double
rel (double a, double b)
{
  return fabs (a - b) / fabs (b);
}

static void
test_absorb_simple (void **state)
{
  double rate[4] = { 0, 2, 3, 0 }, exit[2] = { 0, 1 }, t;

  /* One state, rate 0.25 out: 4 hours. */
  assert_int_equal (mttdl_absorb (1, rate, (double[]){ 0.25 }, &t), 0);
  assert_true (rel (t, 4) < 1e-15);
  /* 0 -> 1 at 2, 1 -> 0 at 3, 1 -> out at 1: t0 = 1/2 + t1 and
   * t1 = (1 + 3 t0) / 4, so t0 = 3.
   */
  assert_int_equal (mttdl_absorb (2, rate, exit, &t), 0);
  assert_true (rel (t, 3) < 1e-14);
}

/* RAID5's chain has an exact solution: ((2N-1) lambda + mu) /
 * (N (N-1) lambda^2).
 */
static void
test_raid5_exact (void **state)
{
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
    {
      const struct params *p = &sets[i];
      double l = 1 / p->hdd, mu = 1 / p->mttr, n = p->disks, t;
      double exact = ((2 * n - 1) * l + mu) / (n * (n - 1) * l * l);
      assert_int_equal (mttdl_raid (p->disks, 1, p->hdd, p->mttr, &t), 0);
      assert_true (rel (t, exact) < 1e-9);
    }
}

/* HHC-1's chain (the paper's Figure 3) solved by hand:
 * t0 = (1 + lambda/(mu+phi) + phi/(mu+lambda))
 *      / (lambda phi (1/(mu+phi) + 1/(mu+lambda))).
 */
static void
test_hhc1_exact (void **state)
{
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
    {
      const struct params *p = &sets[i];
      double l = 1 / p->hdd, f = 1 / p->ssd, mu = 1 / p->mttr, t;
      double exact = (1 + l / (mu + f) + f / (mu + l))
                     / (l * f * (1 / (mu + f) + 1 / (mu + l)));
      assert_int_equal (mttdl_hhc (1, p->hdd, p->ssd, p->mttr, &t), 0);
      assert_true (rel (t, exact) < 1e-9);
    }
}

/* Numeric against closed form: within 3% when MTTR << MTTF. */
static void
test_numeric_vs_closed_form (void **state)
{
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
    {
      const struct params *p = &sets[i];
      double t, a;
      for (unsigned f = 1; f <= 2; f++)
        {
          assert_int_equal (mttdl_raid (p->disks + 1, f, p->hdd, p->mttr, &t),
                            0);
          assert_int_equal (
              mttdl_raid_approx (p->disks + 1, f, p->hdd, p->mttr, &a), 0);
          assert_true (rel (t, a) < 0.03);
          /* The approximation leaves out the ways back: it is low. */
          assert_true (a <= t);
        }
      for (unsigned m = 1; m <= p->logs; m++)
        {
          assert_int_equal (mttdl_hhc (m, p->hdd, p->ssd, p->mttr, &t), 0);
          assert_int_equal (mttdl_hhc_approx (m, p->hdd, p->ssd, p->mttr, &a),
                            0);
          assert_true (rel (t, a) < 0.03);
        }
    }
}

/* Even many log disks with tiny failure rates (answers near 10^60 h)
 * stay accurate: no cancellation in the elimination.
 */
static void
test_many_log_disks (void **state)
{
  double t, a;

  assert_int_equal (mttdl_hhc (MTTDL_MAX_LOG_DISKS, 2e6, 2e6, 1, &t), 0);
  assert_int_equal (mttdl_hhc_approx (MTTDL_MAX_LOG_DISKS, 2e6, 2e6, 1, &a), 0);
  assert_true (t > 1e50);
  assert_true (rel (t, a) < 1e-3);
  assert_int_equal (
      mttdl_raid (MTTDL_MAX_DISKS, MTTDL_MAX_TOLERATE, 1e7, 1, &t), 0);
  assert_int_equal (
      mttdl_raid_approx (MTTDL_MAX_DISKS, MTTDL_MAX_TOLERATE, 1e7, 1, &a), 0);
  assert_true (rel (t, a) < 0.03);
}

/* The paper's result for hhcctl's defaults: HHC-1 above RAID5, HHC-2
 * above RAID6, and the SSD alone below all of them.
 */
static void
test_defaults_ordering (void **state)
{
  double r5, r6, h1, h2;

  assert_int_equal (mttdl_raid (DEF_DISKS, 1, DEF_HDD, DEF_MTTR, &r5), 0);
  assert_int_equal (mttdl_raid (DEF_DISKS, 2, DEF_HDD, DEF_MTTR, &r6), 0);
  assert_int_equal (mttdl_hhc (1, DEF_HDD, DEF_SSD, DEF_MTTR, &h1), 0);
  assert_int_equal (mttdl_hhc (2, DEF_HDD, DEF_SSD, DEF_MTTR, &h2), 0);
  assert_true (h1 > r5);
  assert_true (h2 > r6);
  assert_true (r6 > r5 && h2 > h1);
  assert_true (DEF_SSD < r5);
  /* More disks: RAID gets worse, HHC does not depend on them. */
  double r5b;
  assert_int_equal (mttdl_raid (DEF_DISKS + 4, 1, DEF_HDD, DEF_MTTR, &r5b), 0);
  assert_true (r5b < r5);
  /* A longer repair hurts both. */
  double h1b;
  assert_int_equal (mttdl_hhc (1, DEF_HDD, DEF_SSD, 10 * DEF_MTTR, &h1b), 0);
  assert_true (h1b < h1);
}

static void
test_bad_args (void **state)
{
  double t = -1;
  double rate[4] = { 0, 1, 1, 0 }, noexit[2] = { 0, 0 };

  assert_int_equal (mttdl_raid (4, 1, 0, 24, &t), EINVAL);
  assert_int_equal (mttdl_raid (4, 1, -5, 24, &t), EINVAL);
  assert_int_equal (mttdl_raid (4, 1, 1e6, 0, &t), EINVAL);
  assert_int_equal (mttdl_raid (4, 1, NAN, 24, &t), EINVAL);
  assert_int_equal (mttdl_raid (4, 1, INFINITY, 24, &t), EINVAL);
  assert_int_equal (mttdl_raid (2, 1, 1e6, 24, &t), EINVAL);  /* RAID5 of 2 */
  assert_int_equal (mttdl_raid (3, 2, 1e6, 24, &t), EINVAL);  /* RAID6 of 3 */
  assert_int_equal (mttdl_raid (10, 0, 1e6, 24, &t), EINVAL); /* RAID0 */
  assert_int_equal (mttdl_raid (10, MTTDL_MAX_TOLERATE + 1, 1e6, 24, &t),
                    EINVAL);
  assert_int_equal (mttdl_raid (MTTDL_MAX_DISKS + 1, 1, 1e6, 24, &t), EINVAL);
  assert_int_equal (mttdl_raid_approx (2, 1, 1e6, 24, &t), EINVAL);
  assert_int_equal (mttdl_raid_approx (4, 1, 1e6, -1, &t), EINVAL);
  assert_int_equal (mttdl_hhc (0, 1e6, 1e6, 24, &t), EINVAL);
  assert_int_equal (mttdl_hhc (MTTDL_MAX_LOG_DISKS + 1, 1e6, 1e6, 24, &t),
                    EINVAL);
  assert_int_equal (mttdl_hhc (1, 1e6, 0, 24, &t), EINVAL);
  assert_int_equal (mttdl_hhc (1, 0, 1e6, 24, &t), EINVAL);
  assert_int_equal (mttdl_hhc (1, 1e6, 1e6, NAN, &t), EINVAL);
  assert_int_equal (mttdl_hhc_approx (0, 1e6, 1e6, 24, &t), EINVAL);
  assert_int_equal (mttdl_hhc_approx (1, 1e6, -1e6, 24, &t), EINVAL);
  /* A chain that is never absorbed, a negative rate, no states. */
  assert_int_equal (mttdl_absorb (2, rate, noexit, &t), EINVAL);
  rate[1] = -1;
  assert_int_equal (mttdl_absorb (2, rate, (double[]){ 1, 1 }, &t), EINVAL);
  assert_int_equal (mttdl_absorb (0, rate, noexit, &t), EINVAL);
  assert_int_equal (mttdl_absorb (MTTDL_MAX_STATES + 1, rate, noexit, &t),
                    EINVAL);
  /* Too large for a double. */
  assert_int_equal (mttdl_raid_approx (5, 3, 1e300, 1e-10, &t), ERANGE);
  assert_int_equal (mttdl_hhc_approx (8, 1e300, 1e300, 1e-10, &t), ERANGE);
  /* Nothing was written on failure. */
  assert_true (t == -1);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_absorb_simple),
    cmocka_unit_test (test_raid5_exact),
    cmocka_unit_test (test_hhc1_exact),
    cmocka_unit_test (test_numeric_vs_closed_form),
    cmocka_unit_test (test_many_log_disks),
    cmocka_unit_test (test_defaults_ordering),
    cmocka_unit_test (test_bad_args),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
