package io.fsdp4j.model;

import io.fsdp4j.tensor.Tensor;

/**
 * What a decoder block's forward saves for its backward. Shapes: N rows, C width, F MLP width.
 *
 * @param input (N,C) block input, the residual stream
 * @param rstd1 (N) attention norm's 1/rms
 * @param normed1 (N,C) attention norm output
 * @param qkv (N, (NH+2NKV)*HS) projected q|k|v, after rotary embedding
 * @param attention (N, NH*HS) attention output
 * @param lse (B,NH,T) attention log-sum-exp
 * @param mid (N,C) residual stream after attention
 * @param rstd2 (N) MLP norm's 1/rms
 * @param normed2 (N,C) MLP norm output
 * @param gateUp (N,2F) gate and up projections
 * @param hidden (N,F) silu(gate) * up
 * @param output (N,C) block output
 */
public record BlockActivations(Tensor input, Tensor rstd1, Tensor normed1, Tensor qkv, Tensor attention, Tensor lse,
                               Tensor mid, Tensor rstd2, Tensor normed2, Tensor gateUp, Tensor hidden, Tensor output) {
}
