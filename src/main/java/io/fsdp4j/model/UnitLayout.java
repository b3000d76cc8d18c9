package io.fsdp4j.model;

import java.util.ArrayList;
import java.util.List;

/**
 * The flat parameter buffer of one unit (the embeddings, one decoder block, or the final norm and head):
 * parameters laid out back to back in a fixed order that does not depend on how the unit is later sharded.
 */
public record UnitLayout(String name, List<ParamSpec> params, long numel) {

    public UnitLayout {
        params = List.copyOf(params);
    }

    public ParamSpec param(String paramName) {
        for (ParamSpec p : params) {
            if (p.name().equals(paramName)) {
                return p;
            }
        }
        throw new IllegalArgumentException("no parameter " + paramName + " in unit " + name);
    }

    /** Builds a layout by appending parameters. */
    public static final class Builder {
        private final String name;
        private final List<ParamSpec> params = new ArrayList<>();
        private long next;

        public Builder(String name) {
            this.name = name;
        }

        public Builder add(String paramName, ParamSpec.Kind kind, int... shape) {
            ParamSpec spec = new ParamSpec(paramName, next, shape, kind);
            params.add(spec);
            next = spec.end();
            return this;
        }

        public UnitLayout build() {
            return new UnitLayout(name, params, next);
        }
    }
}
