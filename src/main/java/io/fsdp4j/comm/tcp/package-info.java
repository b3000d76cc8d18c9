/**
 * Collectives of CPU ranks in several processes: the members of a process meet in memory, one of them (the leader)
 * trades frames with the other processes over one TCP connection a peer ({@link io.fsdp4j.comm.tcp.PeerLink}), with
 * the same sums in the same order as in-process groups. What a group needs of its job (aborting it, explaining a
 * timeout) comes through {@link io.fsdp4j.comm.tcp.TcpGroup.Owner}. May use: comm, backend, tensor.
 */
package io.fsdp4j.comm.tcp;
