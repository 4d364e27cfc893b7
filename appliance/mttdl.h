/* Mean time to data loss (MTTDL) of RAID5/6 and of the HHC cache with
 * M HDD log disks: the Markov reliability model of the HHC paper (Li,
 * Feng, Wang, section "reliability analysis"), for hhcctl mttdl.
 *
 * Every device fails independently with an exponential lifetime (rate
 * 1/MTTF) and a failed device is repaired (replaced and rebuilt) with
 * an exponential repair time (rate mu = 1/MTTR).  Data loss is the
 * absorbing state; MTTDL is the mean time to absorption from the
 * state where everything works.
 *
 * RAID with N disks that tolerates f failures (RAID5: f = 1, RAID6:
 * f = 2): states k = 0..f failed disks; one repair at a time.
 *
 *   k -> k+1   (N-k) lambda      (k = f: data loss)
 *   k -> k-1   mu
 *
 * HHC-M: one SSD (rate phi) holds every dirty block; M log HDDs (rate
 * lambda each) mirror the dirty blocks that FLUSH acknowledged.  Data
 * is lost only when the SSD and all M log disks are down at once.
 * States (s, k): s = 1 if the SSD is down (being replaced while the
 * log is replayed into the backend), k = log disks down (being
 * replaced; the gateway re-logs the dirty blocks onto the new disk).
 * The SSD and the log disks are repaired independently, the log disks
 * one at a time:
 *
 *   (0, k) -> (1, k)     phi             SSD fails
 *   (s, k) -> (s, k+1)   (M-k) lambda    a log disk fails
 *   (1, k) -> (0, k)     mu              SSD replaced
 *   (s, k) -> (s, k-1)   mu              a log disk replaced
 *   (1, M)               data loss
 *
 * For M = 1 this is the paper's Figure 3 (its state 1 is (0, 1), its
 * state 2 is (1, 0)).
 *
 * The chains are solved numerically: the mean times to absorption t
 * satisfy (-Q) t = 1 over the transient states (Q the generator).  The
 * closed forms are the usual approximations for MTTR << MTTF (the
 * chain spends almost all its time in state 0; the rate of loss is
 * the rate of the failure sequences that end in it):
 *
 *   RAID5 ~ MTTF^2 / (N (N-1) MTTR)
 *   RAID6 ~ MTTF^3 / (N (N-1) (N-2) MTTR^2)
 *   HHC-M ~ MTTF_hdd^M MTTF_ssd / (2 M! MTTR^M)
 *           (HHC-1 ~ MTTF_hdd MTTF_ssd / (2 MTTR): the paper's eq. 6
 *           for large mu; HHC-2 ~ MTTF_hdd^2 MTTF_ssd / (4 MTTR^2))
 *
 * All functions are pure; times are in hours and each returns 0,
 * EINVAL for arguments out of range or ERANGE if the result does not
 * fit in a double.
 */
#ifndef HHC_MTTDL_H
#define HHC_MTTDL_H

#include <stddef.h>

#define MTTDL_MAX_DISKS 1024        /* RAID disks */
#define MTTDL_MAX_TOLERATE 3        /* failures a RAID survives */
#define MTTDL_MAX_LOG_DISKS 8       /* HHC log mirrors (HHC_MAX_LOGS) */
#define MTTDL_MAX_STATES 32         /* of any chain here */
#define MTTDL_HOURS_PER_YEAR 8766.0 /* 365.25 days */

/* Mean time to absorption from state 0 of a chain of n transient
 * states: rate[i * n + j] is the rate from i to j (i != j; the
 * diagonal is ignored), out[i] the rate from i into the absorbing
 * state.  Gaussian elimination in the form that keeps every operation
 * an addition of non-negative numbers (the diagonal is recomputed as
 * the sum of the remaining outgoing rates, as in the GTH algorithm),
 * so it stays accurate when repairs are many orders of magnitude
 * faster than failures.  EINVAL if a rate is negative or not finite,
 * or the absorbing state cannot be reached.
 */
int mttdl_absorb (size_t n, const double *rate, const double *out,
                  double *hours);

/* RAID of disks disks tolerating tolerate failures (1: RAID5, 2:
 * RAID6): the chain solved numerically.  disks >= tolerate + 2.
 */
int mttdl_raid (unsigned disks, unsigned tolerate, double mttf, double mttr,
                double *hours);
/* The same, closed-form approximation. */
int mttdl_raid_approx (unsigned disks, unsigned tolerate, double mttf,
                       double mttr, double *hours);

/* HHC with log_disks (1 .. MTTDL_MAX_LOG_DISKS) log mirrors: the chain
 * solved numerically.
 */
int mttdl_hhc (unsigned log_disks, double mttf_hdd, double mttf_ssd,
               double mttr, double *hours);
/* The same, closed-form approximation. */
int mttdl_hhc_approx (unsigned log_disks, double mttf_hdd, double mttf_ssd,
                      double mttr, double *hours);

#endif /* HHC_MTTDL_H */
