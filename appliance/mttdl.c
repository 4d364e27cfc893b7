/* MTTDL of RAID5/6 and HHC-M: the chains of mttdl.h, built as rate
 * tables and solved by mttdl_absorb.
 *
 * Why not plain Gaussian elimination with pivoting: with MTTR = 24 h
 * and MTTF = 10^6 h the answers are around 10^14 h while the rates are
 * around 10^-1 and 10^-6, so the diagonal of -Q (out-rate minus what
 * comes back) loses most of its digits to cancellation, more with
 * every log disk.  Eliminating a state instead folds its rates into
 * the others (i -> m -> j becomes i -> j), which only ever adds
 * non-negative numbers; the diagonal is then the sum of what is left
 * going out (Grassmann, Taksar and Heyman's trick).  The result is
 * accurate to a few ulps for any rates.
 */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "mttdl.h"

static int
valid_time (double h)
{
  return isfinite (h) && h > 0;
}

int
mttdl_absorb (size_t n, const double *rate, const double *out, double *hours)
{
  double a[MTTDL_MAX_STATES * MTTDL_MAX_STATES];
  double e[MTTDL_MAX_STATES], b[MTTDL_MAX_STATES], d[MTTDL_MAX_STATES];
  double t[MTTDL_MAX_STATES];

  if (n == 0 || n > MTTDL_MAX_STATES)
    return EINVAL;
  for (size_t i = 0; i < n; i++)
    {
      if (!isfinite (out[i]) || out[i] < 0)
        return EINVAL;
      for (size_t j = 0; j < n; j++)
        {
          double r = i == j ? 0 : rate[i * n + j];
          if (!isfinite (r) || r < 0)
            return EINVAL;
          a[i * n + j] = r;
        }
      e[i] = out[i];
      b[i] = 1; /* mean time spent per visit, times the out-rate */
    }
  /* Eliminate states 0 .. n-1 in turn. */
  for (size_t m = 0; m < n; m++)
    {
      d[m] = e[m];
      for (size_t j = m + 1; j < n; j++)
        d[m] += a[m * n + j];
      if (!(d[m] > 0))
        return EINVAL; /* no way out of m: never absorbed */
      for (size_t i = m + 1; i < n; i++)
        {
          double f = a[i * n + m] / d[m];
          if (f == 0)
            continue;
          for (size_t j = m + 1; j < n; j++)
            if (j != i)
              a[i * n + j] += f * a[m * n + j];
          e[i] += f * e[m];
          b[i] += f * b[m];
          a[i * n + m] = 0;
        }
    }
  /* Back substitution: t[m] = (b[m] + sum over j > m of a[m][j] t[j]) / d[m]. */
  for (size_t m = n; m-- > 0;)
    {
      double s = b[m];
      for (size_t j = m + 1; j < n; j++)
        s += a[m * n + j] * t[j];
      t[m] = s / d[m];
    }
  if (!isfinite (t[0]))
    return ERANGE;
  *hours = t[0];
  return 0;
}

static int
raid_args_ok (unsigned disks, unsigned tolerate, double mttf, double mttr)
{
  return tolerate >= 1 && tolerate <= MTTDL_MAX_TOLERATE
         && disks >= tolerate + 2 && disks <= MTTDL_MAX_DISKS
         && valid_time (mttf) && valid_time (mttr);
}

int
mttdl_raid (unsigned disks, unsigned tolerate, double mttf, double mttr,
            double *hours)
{
  double rate[MTTDL_MAX_STATES * MTTDL_MAX_STATES] = { 0 };
  double out[MTTDL_MAX_STATES] = { 0 };
  double lambda = 1 / mttf, mu = 1 / mttr;
  size_t n = tolerate + 1;

  if (!raid_args_ok (disks, tolerate, mttf, mttr))
    return EINVAL;
  for (size_t k = 0; k < n; k++)
    {
      double fail = (disks - k) * lambda;
      if (k + 1 < n)
        rate[k * n + k + 1] = fail;
      else
        out[k] = fail;
      if (k > 0)
        rate[k * n + k - 1] = mu;
    }
  return mttdl_absorb (n, rate, out, hours);
}

int
mttdl_raid_approx (unsigned disks, unsigned tolerate, double mttf, double mttr,
                   double *hours)
{
  double h;

  if (!raid_args_ok (disks, tolerate, mttf, mttr))
    return EINVAL;
  /* mu^f / (N (N-1) ... (N-f) lambda^(f+1)) */
  h = mttf;
  for (unsigned i = 0; i < tolerate; i++)
    h *= mttf / mttr;
  for (unsigned i = 0; i <= tolerate; i++)
    h /= disks - i;
  if (!isfinite (h))
    return ERANGE;
  *hours = h;
  return 0;
}

static int
hhc_args_ok (unsigned m, double mttf_hdd, double mttf_ssd, double mttr)
{
  return m >= 1 && m <= MTTDL_MAX_LOG_DISKS && valid_time (mttf_hdd)
         && valid_time (mttf_ssd) && valid_time (mttr);
}

/* State (s, k) of HHC-M: s * (M + 1) + k; (1, M), the loss, is n. */
static size_t
hhc_state (unsigned m, unsigned s, unsigned k)
{
  return (size_t)s * (m + 1) + k;
}

int
mttdl_hhc (unsigned log_disks, double mttf_hdd, double mttf_ssd, double mttr,
           double *hours)
{
  double rate[MTTDL_MAX_STATES * MTTDL_MAX_STATES] = { 0 };
  double out[MTTDL_MAX_STATES] = { 0 };
  double lambda = 1 / mttf_hdd, phi = 1 / mttf_ssd, mu = 1 / mttr;
  unsigned m = log_disks;
  size_t n = 2 * ((size_t)m + 1) - 1;

  if (!hhc_args_ok (m, mttf_hdd, mttf_ssd, mttr))
    return EINVAL;
  for (unsigned s = 0; s <= 1; s++)
    for (unsigned k = 0; k <= m; k++)
      {
        size_t i = hhc_state (m, s, k), to;
        if (i == n)
          continue; /* the loss */
        if (s == 0)
          {
            to = hhc_state (m, 1, k);
            if (to == n)
              out[i] += phi;
            else
              rate[i * n + to] += phi;
          }
        if (k < m)
          {
            to = hhc_state (m, s, k + 1);
            if (to == n)
              out[i] += (m - k) * lambda;
            else
              rate[i * n + to] += (m - k) * lambda;
          }
        if (s == 1)
          rate[i * n + hhc_state (m, 0, k)] += mu;
        if (k > 0)
          rate[i * n + hhc_state (m, s, k - 1)] += mu;
      }
  return mttdl_absorb (n, rate, out, hours);
}

int
mttdl_hhc_approx (unsigned log_disks, double mttf_hdd, double mttf_ssd,
                  double mttr, double *hours)
{
  double h;

  if (!hhc_args_ok (log_disks, mttf_hdd, mttf_ssd, mttr))
    return EINVAL;
  /* mu^M / (2 M! lambda^M phi) */
  h = mttf_ssd / 2;
  for (unsigned i = 1; i <= log_disks; i++)
    h *= mttf_hdd / mttr / i;
  if (!isfinite (h))
    return ERANGE;
  *hours = h;
  return 0;
}
