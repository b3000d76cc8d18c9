package io.fsdp4j.job;

import io.fsdp4j.UserError;
import java.time.Duration;
import java.util.Map;

/**
 * How one process of a job of several joins it, whatever carries its collectives (the TCP world, NCCL's bootstrap;
 * the watch and the preflight read them too): the job token, the restart attempt, how long the rendezvous waits for
 * the others, how long a collective waits for a peer, and the address to publish (null: found from the store's
 * connection).
 */
public record JobSettings(String token, int attempt, Duration rendezvousTimeout, Duration collectiveTimeout,
                          String advertise) {
    /** The job's restart attempt (0 first), set by {@code fsdp4j launch}: a store of an earlier one is waited out. */
    public static final String RESTART_ENV = "FSDP4J_RESTART";
    /** Seconds the rendezvous waits for every process (default 600). */
    public static final String RDZV_TIMEOUT_ENV = "FSDP4J_RDZV_TIMEOUT";
    /** The address other processes reach this one at; default: the one this host reaches the store from. */
    public static final String ADVERTISE_ENV = "FSDP4J_ADVERTISE_ADDR";

    /** From {@value JobToken#ENV}, {@value #RESTART_ENV}, {@value #RDZV_TIMEOUT_ENV}, {@value #ADVERTISE_ENV}. */
    public static JobSettings fromEnv(Map<String, String> env, Duration collectiveTimeout) {
        int attempt = 0;
        Duration rdzv = Duration.ofMinutes(10);
        try {
            attempt = Integer.parseInt(env.getOrDefault(RESTART_ENV, "0").strip());
            if (env.get(RDZV_TIMEOUT_ENV) != null) {
                rdzv = Duration.ofSeconds(Long.parseLong(env.get(RDZV_TIMEOUT_ENV).strip()));
            }
        } catch (NumberFormatException e) {
            throw new UserError(RESTART_ENV + " and " + RDZV_TIMEOUT_ENV + " must be integers: " + e.getMessage());
        }
        String advertise = env.get(ADVERTISE_ENV);
        return new JobSettings(JobToken.require(env), attempt, rdzv, collectiveTimeout,
                advertise == null || advertise.isBlank() ? null : advertise.strip());
    }
}
