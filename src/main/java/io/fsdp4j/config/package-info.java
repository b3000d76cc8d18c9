/**
 * The train config: every option of a training run, in one place. {@link io.fsdp4j.config.TrainConfig#load} reads a
 * YAML file of nested sections, applies {@code --set section.key=value} overrides (later wins; lists
 * comma-separated), checks types and ranges, and returns immutable records, one per section. Every error is a
 * one-line {@link io.fsdp4j.UserError} naming the file or the key. Closed sets are enums implementing
 * {@link io.fsdp4j.config.ConfigChoice}: the user spelling is the constant's name in lower case.
 *
 * <p>The keys, their defaults (the built-in demo: a small model on CPU ranks; a fine-tune, with {@code model.path},
 * gets those marked "fine-tune" by {@link io.fsdp4j.config.TrainConfig#load(java.nio.file.Path, java.util.List, int,
 * java.time.Instant)}) and their ranges:
 * <pre>
 * model.path                     null      Hugging Face model directory; setting it drops the default preset
 * model.preset                   tiny      named architecture with random weights (not both with model.path)
 * data.train, data.eval          null      dataset files (null train: built-in demo data)
 * data.seq_len                   64        &gt;= 2, or auto (fine-tune: auto): the longest example's loss-carrying
 *                                          tokens, up to the model's context (4096 at most)
 * data.pack                      false     pack documents, never attending across them
 * data.chat_template_timeout     30        &gt; 0: seconds the chat template may take to render one conversation
 * train.steps                    100       optimizer steps, &gt;= 1
 * train.batch_size               2         sequences per rank per micro-batch, &gt;= 1
 * train.grad_accum               1         micro-batches per step, &gt;= 1
 * train.seed                     1234
 * train.epochs                   0         passes over the data instead of train.steps (not both); 0: steps
 * optim.lr                       3e-3      &gt; 0 (fine-tune: 2e-5)
 * optim.betas                    0.9,0.95  two numbers in [0, 1)
 * optim.eps                      1e-8      &gt; 0
 * optim.weight_decay             0.1       &gt;= 0
 * optim.decay                    matrices  matrices | all
 * optim.max_grad_norm            1.0       &gt;= 0, 0 is off
 * schedule.kind                  cosine    constant | cosine | linear (after linear warmup)
 * schedule.warmup_steps          10        &gt;= 0 (fine-tune: 0)
 * schedule.min_lr_ratio          0.1       in [0, 1]
 * schedule.warmup_ratio          0         in [0, 1): the warmup as a fraction of the steps (fine-tune: 0.03)
 * fsdp.strategy                  full_shard  full_shard | shard_grad_op | no_shard | hybrid_shard | hybrid_shard_zero2
 * fsdp.shard_size                0         &gt;= 0; 0: the ranks of one node; non-zero only for hybrid strategies
 * fsdp.param_dtype               fp32      bf16 | fp32 | fp16 | fp8 (fine-tune on GPUs: bf16; fp16 for GPUs before
 *                                          sm_80; fp8: bf16 with the blocks' linear products in fp8, sm_89 and later)
 * fsdp.reduce_dtype              fp32      bf16 | fp32 | fp16
 * fsdp.activation_checkpointing  none      none | full | full_keep_attention | selective (see
 *                                          {@link io.fsdp4j.config.ActivationCheckpointing}), or auto (fine-tune on
 *                                          GPUs: auto): at the run's start, the mode and both block counts below that
 *                                          fsdp4j plan predicts fastest with 1% of the GPU's memory to spare (CPU
 *                                          ranks: none); said in one line ("fsdp4j: auto: ...")
 * fsdp.blocks_not_checkpointed   0         &gt;= 0: the model's last N blocks keep every activation (as none), the
 *                                          others follow fsdp.activation_checkpointing (fsdp4j plan: how many fit)
 * fsdp.blocks_selective          0         &gt;= 0: under full or full_keep_attention, the N blocks before those not
 *                                          checkpointed are checkpointed selectively (products' and attention's
 *                                          outputs kept, norms and the MLP's activation recomputed): more blocks for
 *                                          the same memory (fsdp4j plan advises both counts)
 * fsdp.cpu_offload               false     true: master, gradient and AdamW shards in host memory, AdamW on the host
 * fsdp.prefetch                  1         0-8: units ahead of the computing one whose all-gather is started (0: none)
 * fsdp.loss_scale                auto      auto (dynamic with an fp16 dtype, else none) | dynamic | none | a number
 * fsdp.loss_scale_init           65536     &gt; 0: a dynamic scale's first (torch.amp.GradScaler's init_scale)
 * fsdp.loss_scale_growth_interval 2000     &gt;= 1: finite steps in a row after which a dynamic scale doubles
 * fsdp.param_copy                per_gather per_gather | kept: a half-precision param_dtype's copy of the master shard
 *                                          rounded at every gather, or kept beside it and written by the optimizer
 *                                          (2 bytes a parameter / shard size more memory, no rounding at gathers),
 *                                          or auto (fine-tune on GPUs: auto): kept where the plan predicts it faster
 *                                          and fitting with 1% spare, decided with the checkpointing
 * fsdp.fp8_recipe                tensorwise tensorwise | rowwise: the fp8 products' scales (param_dtype fp8 only): one
 *                                          per operand, or one per row along the product's kept dimension
 * dist.device                    auto      auto | cpu | cuda
 * dist.ranks                     2         ranks on this node, &gt;= 1 (fine-tune on GPUs: the GPUs)
 * dist.nnodes                    1         &gt;= 1
 * dist.node_rank                 0         in [0, nnodes)
 * dist.rdzv                      null      host:port of a multi-node rendezvous
 * dist.preflight                 true      compare the processes of a job before its first step
 * dist.exclude_unhealthy         false     true: start without nodes that fail the preflight's health test, if the
 *                                          layout allows
 * checkpoint.dir                 null      required by checkpoint.every &gt; 0 and resume auto
 * checkpoint.every               0         &gt;= 0; 0: only at the end (when dir is set)
 * checkpoint.keep                2         &gt;= 1
 * checkpoint.resume              none      none | auto | a checkpoint path
 * checkpoint.export_every        0         &gt;= 0, a multiple of every; also export to dir/hf-step-N (and the last)
 * log.metrics                    null      metrics JSONL path
 * log.every                      1         &gt;= 1
 * log.prometheus_port            0         0 is off, else 1..65535
 * log.tensorboard                null      a directory for TensorBoard event files; true: run.dir/tensorboard
 *                                          (no run.dir: beside log.metrics); null or false: off
 * log.eval_every                 0         with data.eval: its loss every N steps; 0: only after the last step
 *                                          (and always before the first)
 * run.dir                        null      the run's output directory; train defaults it to runs/NAME and puts
 *                                          checkpoint.dir and log.metrics left out there
 * run.name                       null      NAME: the model's name and the UTC start time by default
 * lora.rank                      0         &gt;= 0; 0: no LoRA (every weight trains), else the adapters' rank r
 * lora.alpha                     8         &gt; 0: adapters scaled by alpha / r (PEFT's lora_alpha)
 * lora.dropout                   0         in [0, 1): dropout on the adapters' input
 * lora.target_modules            auto      the family's linears: q_proj, k_proj, v_proj, o_proj, gate_proj,
 *                                          up_proj, down_proj (Llama, Mistral, Qwen, Gemma); qkv_proj, o_proj,
 *                                          gate_up_proj, down_proj (Phi-3); query_key_value, dense, dense_h_to_4h,
 *                                          dense_4h_to_h (BLOOM); or all-linear; auto: PEFT's default of the family
 *                                          (q_proj,v_proj; Phi-3 qkv_proj; BLOOM query_key_value)
 * lora.rslora                    false     true: scaled by alpha / sqrt(r) (rank-stabilised LoRA)
 * lora.init                      null      a PEFT adapter directory (adapter_model.safetensors) to start from
 * lora.quantize                  none      nf4: QLoRA, each block's frozen linears in 4-bit NF4 as bitsandbytes
 *                                          (bnb_4bit_quant_type) stores them, dequantized to fsdp.param_dtype
 *                                          after each gather; needs lora.rank &gt; 0
 * attention.kernel               auto      auto | fsdp4j | cudnn: the GPU attention engine; auto: for each shape
 *                                          the faster of fsdp4j's kernels and cuDNN's (where libcudnn.so.9 is found
 *                                          and runs the shape), both timed at its first use
 * attention.deterministic        false     true: the backward sums in a fixed order (fsdp4j's two backward kernels;
 *                                          the one-kernel Hopper backward and cuDNN's add dq in no fixed order), so
 *                                          reruns give the same bits; an error with attention.kernel: cudnn
 * matmul.algorithm               heuristic heuristic | timed: a GPU product's cuBLASLt algorithm; heuristic: cuBLASLt's
 *                                          first choice; timed: up to eight of its candidates timed at the shape's
 *                                          first use, the fastest kept for the process
 * </pre>
 *
 * <p>Unknown keys are all named at once, each with the key meant where it can be told (the same name in another
 * section, or Trainer's, axolotl's or torchtune's name for it). YAML keys may be dotted ({@code model.preset: tiny} is
 * {@code model:} then {@code preset: tiny}); a file may start with a UTF-8 byte-order mark.
 *
 * <p>Types: integers and numbers may be YAML numbers or text ({@code 3e-3} is text to YAML 1.1 and is accepted);
 * booleans are {@code true}/{@code false}; a path or optional string given as {@code ~}, {@code null} or empty is
 * null. Relative paths stay relative to the current directory, not to the config file.
 *
 * <p>Adding a key: a component to the section record (with a range check in its compact constructor), a read in its
 * {@code bind} (the read also makes the key known, so it is no longer reported as unknown), an entry in its
 * {@code toMap}, a line above, and a row in the README's table. {@code TrainConfigTest} checks that a
 * non-default config survives {@code toYaml} and {@code load}.
 *
 * <p>May use: tensor, safetensors (and the root's UserError); used by every package above it.
 */
package io.fsdp4j.config;
