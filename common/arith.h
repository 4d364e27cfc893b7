/* Small arithmetic helpers for the core, the plugins and the
 * appliance (arguments may be evaluated twice).
 */
#ifndef HHC_COMMON_ARITH_H
#define HHC_COMMON_ARITH_H

#define HHC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HHC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define HHC_IS_POW2(x) ((x) != 0 && ((x) & ((x)-1)) == 0)
#define HHC_ROUND_UP(x, a) ((((x) + (a)-1) / (a)) * (a))

#endif /* HHC_COMMON_ARITH_H */
