// Sine and cosine written as straight-line arithmetic, so that a compiler can
// vectorise a loop that calls them (libm's sin/cos are opaque calls) and a
// CUDA kernel computes the same values as the CPU. Accurate to about one ulp
// for |x| < 1.6e6 (Cody-Waite reduction by pi/2 in three parts, fdlibm's
// kernel polynomials on [-pi/4, pi/4]); beyond that the reduction loses bits.
#ifndef RL_ENVS_TRIG_H_
#define RL_ENVS_TRIG_H_

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace rl {

RL_HOST_DEVICE inline void SinCos(double x, double* sin_x, double* cos_x) {
  constexpr double kTwoOverPi = 6.36619772367581382433e-01;
  constexpr double kPio2_1 = 1.57079632673412561417e+00;   // first 33 bits
  constexpr double kPio2_2 = 6.07710050630396597660e-11;   // next 33 bits
  constexpr double kPio2_3 = 2.02226624871116645580e-21;   // next 33 bits
  constexpr double kPio2_3t = 8.47842766036889956997e-32;  // pi/2 - the above
  // Round x*2/pi to the nearest integer q; adding 1.5*2^52 leaves q in the
  // low bits of the mantissa (valid for |q| < 2^51).
  constexpr double kShifter = 6755399441055744.0;
  const double shifted = x * kTwoOverPi + kShifter;
  const double q = shifted - kShifter;
  uint64_t bits;
  memcpy(&bits, &shifted, sizeof(bits));
  const uint64_t quadrant = bits & 3;
  const double r =
      ((x - q * kPio2_1) - q * kPio2_2) - q * kPio2_3 - q * kPio2_3t;
  const double z = r * r;
  const double s =
      r + r * z *
              (-1.66666666666666324348e-01 +
               z * (8.33333333332248946124e-03 +
                    z * (-1.98412698298579493134e-04 +
                         z * (2.75573137070700676789e-06 +
                              z * (-2.50507602534068634195e-08 +
                                   z * 1.58969099521155010221e-10)))));
  const double c =
      1.0 - 0.5 * z +
      z * z *
          (4.16666666666666019037e-02 +
           z * (-1.38888888888741095749e-03 +
                z * (2.48015872894767294178e-05 +
                     z * (-2.75573143513906633035e-07 +
                          z * (2.08757232129817482790e-09 +
                               z * -1.13596475577881948265e-11)))));
  // sin(r + q*pi/2) and cos(r + q*pi/2) by quadrant, as selects.
  const double sin_abs = (quadrant & 1) ? c : s;
  const double cos_abs = (quadrant & 1) ? s : c;
  *sin_x = (quadrant & 2) ? -sin_abs : sin_abs;
  *cos_x = ((quadrant + 1) & 2) ? -cos_abs : cos_abs;
}

}  // namespace rl

#endif  // RL_ENVS_TRIG_H_
