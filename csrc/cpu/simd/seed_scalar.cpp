// The scalar seed-op table: the plain loops of cpu/seed_simd.h.
#include "cpu/seed_simd.h"

namespace pyggml::cpu::seed {

namespace {
void hc_pre(float* o, const char* x0, size_t xnb1, const float* w, int64_t hc, int64_t n) {
    hc_pre_body(o, x0, xnb1, w, hc, n);
}
void hc_post(float* o, const float* x, float p, const char* r0, size_t rnb1, const float* c, int64_t hc, int64_t d,
             int64_t n) {
    hc_post_body(o, x, p, r0, rnb1, c, hc, d, n);
}
// scores[0..kLiBlock) = sum_h relu(q_h . KT[:, j]) * w[h]   (h increasing)
void li_block(const float* KT, int64_t ldk, const char* q0, size_t qnb1, const float* w, int64_t H, int64_t D,
                  float* sc) {
    for (int64_t j = 0; j < kLiBlock; ++j) sc[j] = 0.0f;
    float acc[kLiBlock];
    for (int64_t h = 0; h < H; ++h) {
        const float* q = (const float*)(q0 + h * qnb1);
        for (int64_t j = 0; j < kLiBlock; ++j) acc[j] = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float* kr = KT + d * ldk;
            const float qd = q[d];
            for (int64_t j = 0; j < kLiBlock; ++j) acc[j] += qd * kr[j];
        }
        for (int64_t j = 0; j < kLiBlock; ++j) sc[j] += (acc[j] > 0.0f ? acc[j] : 0.0f) * w[h];
    }
}
void hc_pre_gated(float* o, const char* x0, size_t xnb1, const char* g0, size_t gnb1, float scale, int64_t hc,
                  int64_t n) {
    hc_pre_gated_body(o, x0, xnb1, g0, gnb1, scale, hc, 0, n);
}
}  // namespace

const SeedOps& seed_scalar() {
    static const SeedOps k{hc_pre, hc_post, li_block, dot_scalar,
                           hc_comb4_scalar, hc_pre_gated};
    return k;
}

}  // namespace pyggml::cpu::seed
