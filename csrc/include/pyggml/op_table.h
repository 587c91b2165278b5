// THE op table: the single source of truth for every op pyggml knows.
// X(ENUM, family, "python constructors that create or modify this op")
// From it come: the Op enum, op names, the CPU dispatch table (cpu_forward_<ENUM>,
// cpu_work_size_<ENUM>), the Python-visible table (gg.op_table()) and the coverage
// test (tests/test_op_table.py: every listed constructor is bound and tested).
#pragma once
#include <cstdint>

#define PYGGML_OP_TABLE(X) \
    X(NONE,              layout,  "") \
    X(DUP,               copy,    "dup dup_inplace") \
    X(ADD,               binary,  "add add_inplace") \
    X(SUB,               binary,  "sub sub_inplace") \
    X(MUL,               binary,  "mul mul_inplace") \
    X(DIV,               binary,  "div div_inplace") \
    X(SQR,               unary,   "sqr sqr_inplace") \
    X(SQRT,              unary,   "sqrt sqrt_inplace") \
    X(SUM_ROWS,          reduce,  "sum_rows") \
    X(MEAN,              reduce,  "mean") \
    X(CUMSUM,            reduce,  "cumsum") \
    X(LOG,               unary,   "log log_inplace") \
    X(SIN,               unary,   "sin sin_inplace") \
    X(COS,               unary,   "cos cos_inplace") \
    X(LEAKY_RELU,        unary,   "leaky_relu") \
    X(SUM,               reduce,  "sum") \
    X(ARGMAX,            reduce,  "argmax") \
    X(COUNT_EQUAL,       reduce,  "count_equal") \
    X(ADD1,              binary,  "add1 add1_inplace") \
    X(ADD_ID,            binary,  "add_id") \
    X(ACC,               set,     "acc acc_inplace") \
    X(SET,               set,     "set set_inplace set_1d set_1d_inplace set_2d set_2d_inplace") \
    X(DIAG,              diag,    "diag") \
    X(DIAG_MASK_INF,     diag,    "diag_mask_inf diag_mask_inf_inplace") \
    X(DIAG_MASK_ZERO,    diag,    "diag_mask_zero diag_mask_zero_inplace") \
    X(ROLL,              layout,  "roll") \
    X(PAD_REFLECT_1D,    layout,  "pad_reflect_1d") \
    X(TIMESTEP_EMBEDDING, misc,   "timestep_embedding") \
    X(L2_NORM,           norm,    "l2_norm l2_norm_inplace") \
    X(GROUP_NORM,        norm,    "group_norm group_norm_inplace") \
    X(OUT_PROD,          linalg,  "out_prod") \
    X(SOLVE_TRI,         linalg,  "solve_tri") \
    X(SOFT_MAX_BACK,     softmax, "soft_max_ext_back soft_max_ext_back_inplace") \
    X(ARGSORT,           sort,    "argsort argsort_top_k") \
    X(TOP_K,             sort,    "top_k") \
    X(REPEAT,            layout,  "repeat repeat_4d") \
    X(CONCAT,            layout,  "concat") \
    X(PAD,               layout,  "pad pad_ext pad_circular pad_ext_circular") \
    X(NORM,              norm,    "norm norm_inplace") \
    X(RMS_NORM,          norm,    "rms_norm rms_norm_inplace") \
    X(MUL_MAT,           mul_mat, "mul_mat") \
    X(MUL_MAT_ID,        mul_mat, "mul_mat_id") \
    X(SCALE,             misc,    "scale scale_inplace scale_bias scale_bias_inplace") \
    X(CLAMP,             misc,    "clamp clamp_inplace") \
    X(ARANGE,            misc,    "arange") \
    X(TRI,               misc,    "tri") \
    X(FILL,              fill,    "fill fill_inplace") \
    X(SET_ROWS,          rows,    "set_rows") \
    X(GET_ROWS,          rows,    "get_rows") \
    X(CPY,               copy,    "cpy cast") \
    X(CONT,              copy,    "cont cont_1d cont_2d cont_3d cont_4d") \
    X(RESHAPE,           layout,  "reshape reshape_1d reshape_2d reshape_3d reshape_4d") \
    X(VIEW,              layout,  "view_1d view_2d view_3d view_4d view_tensor") \
    X(PERMUTE,           layout,  "permute") \
    X(TRANSPOSE,         layout,  "transpose") \
    X(SOFT_MAX,          softmax, "soft_max soft_max_ext soft_max_add_sinks") \
    X(ROPE,              rope,    "rope rope_ext rope_multi rope_ext_back rope_set_offset") \
    X(FLASH_ATTN_EXT,    flash_attn, "flash_attn_ext flash_attn_ext_add_sinks flash_attn_ext_set_prec flash_attn_ext_set_n_kv_max") \
    X(SSM_CONV,          ssm,     "ssm_conv") \
    X(SSM_SCAN,          ssm,     "ssm_scan") \
    X(IM2COL,            conv,    "im2col conv_1d conv_1d_ph conv_1d_dw conv_1d_dw_ph conv_2d conv_2d_sk_p0 conv_2d_s1_ph conv_2d_dw") \
    X(IM2COL_3D,         conv,    "im2col_3d conv_3d") \
    X(CONV_2D,           conv,    "conv_2d_direct") \
    X(CONV_3D,           conv,    "conv_3d_direct") \
    X(CONV_2D_DW,        conv,    "conv_2d_dw_direct") \
    X(CONV_TRANSPOSE_1D, conv,    "conv_transpose_1d") \
    X(CONV_TRANSPOSE_2D, conv,    "conv_transpose_2d_p0") \
    X(COL2IM_1D,         conv,    "col2im_1d") \
    X(POOL_1D,           pool,    "pool_1d") \
    X(POOL_2D,           pool,    "pool_2d") \
    X(UPSCALE,           upscale, "upscale upscale_ext interpolate") \
    X(WIN_PART,          window,  "win_part") \
    X(WIN_UNPART,        window,  "win_unpart") \
    X(GET_REL_POS,       window,  "get_rel_pos") \
    X(ADD_REL_POS,       window,  "add_rel_pos add_rel_pos_inplace") \
    X(RWKV_WKV6,         linear_attn, "rwkv_wkv6") \
    X(GATED_LINEAR_ATTN, linear_attn, "gated_linear_attn") \
    X(RWKV_WKV7,         linear_attn, "rwkv_wkv7") \
    X(GATED_DELTA_NET,   delta_net, "gated_delta_net") \
    X(UNARY,             unary,   "unary silu gelu gelu_quick sigmoid exp neg relu tanh softplus abs sgn step elu hardswish hardsigmoid expm1 gelu_erf floor ceil round trunc xielu") \
    X(GLU,               glu,     "glu glu_split swiglu swiglu_split swiglu_swapped geglu geglu_split geglu_swapped reglu reglu_split reglu_swapped geglu_erf geglu_erf_split geglu_erf_swapped geglu_quick geglu_quick_split geglu_quick_swapped swiglu_oai swiglu_clamp") \
    X(DSV4_HC_COMB,      dsv4_hc, "dsv4_hc_comb") \
    X(DSV4_HC_PRE,       dsv4_hc, "dsv4_hc_pre dsv4_hc_pre_gated") \
    X(DSV4_HC_POST,      dsv4_hc, "dsv4_hc_post") \
    X(LIGHTNING_INDEXER, lightning_indexer, "lightning_indexer")

namespace pyggml {

enum class Op : int32_t {
#define PYGGML_X(name, family, py) name,
    PYGGML_OP_TABLE(PYGGML_X)
#undef PYGGML_X
    COUNT
};

const char* op_name(Op op);          // "MUL_MAT"
const char* op_family(Op op);        // "mul_mat" (the file family under csrc/cpu/)
const char* op_constructors(Op op);  // "mul_mat" (space separated Python names)
bool op_is_layout_only(Op op);       // NONE, VIEW, RESHAPE, PERMUTE, TRANSPOSE: no compute

// Sub-op ids, numbered as ggml numbers them (stored in op_params slot 0).
enum class UnaryOp : int32_t {
    ABS = 0, SGN, NEG, STEP, TANH, ELU, RELU, SIGMOID, GELU, GELU_QUICK, SILU, HARDSWISH,
    HARDSIGMOID, EXP, EXPM1, SOFTPLUS, GELU_ERF, XIELU, FLOOR, CEIL, ROUND, TRUNC, COUNT
};
enum class GluOp : int32_t {
    REGLU = 0, GEGLU, SWIGLU, SWIGLU_OAI, GEGLU_ERF, GEGLU_QUICK, SWIGLU_CLAMP, COUNT
};

}  // namespace pyggml
