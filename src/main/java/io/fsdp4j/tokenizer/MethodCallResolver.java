package io.fsdp4j.tokenizer;

import java.beans.FeatureDescriptor;
import java.util.Iterator;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * A resolver of chat templates that sees only method calls ({@link #invoke}): it never marks a property resolved,
 * so reading, typing and writing properties fall through to the resolvers after it (Jinjava's).
 */
abstract class MethodCallResolver extends ELResolver {
    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {}

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return true; // not read: the property stays unresolved here
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return null;
    }

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return null;
    }
}
