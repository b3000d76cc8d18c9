package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.util.Locale;

/**
 * {@code fsdp.loss_scale}, {@code fsdp.loss_scale_init}, {@code fsdp.loss_scale_growth_interval}: how the loss is
 * multiplied before backward so that small gradients survive fp16 (whose smallest normal value is 6.1e-5), and
 * divided out of the gradients before clipping and the optimizer. Dynamic scaling is that of
 * {@code torch.amp.GradScaler} with its defaults: the scale starts at {@code initScale}, is halved (and the step
 * skipped on every rank) when a gradient on any rank is not finite, and doubled after {@code growthInterval} steps
 * in a row without one.
 *
 * @param mode           none (the loss as it is), a static scale, or dynamic
 * @param initScale      the static scale, or the dynamic one's first ({@code fsdp.loss_scale_init}); 1 for none
 * @param growthInterval steps in a row with finite gradients after which a dynamic scale doubles (read only by a
 *                       dynamic scale)
 */
public record LossScaling(Mode mode, double initScale, int growthInterval) {
    /** torch.amp.GradScaler's init_scale. */
    public static final double DEFAULT_INIT_SCALE = 65536;
    /** torch.amp.GradScaler's growth_interval. */
    public static final int DEFAULT_GROWTH_INTERVAL = 2000;
    /** What a dynamic scale is multiplied by after growthInterval clean steps (GradScaler's growth_factor). */
    public static final double GROWTH_FACTOR = 2;
    /** What a dynamic scale is multiplied by after a step whose gradients overflowed (GradScaler's backoff_factor). */
    public static final double BACKOFF_FACTOR = 0.5;

    /** The kinds of {@code fsdp.loss_scale}. */
    public enum Mode { NONE, STATIC, DYNAMIC }

    public LossScaling {
        Check.present("fsdp.loss_scale", mode);
        if (!(initScale > 0) || !Double.isFinite(initScale)) {
            throw new UserError("config key 'fsdp." + (mode == Mode.STATIC ? "loss_scale" : "loss_scale_init")
                    + "' must be a positive number, got '" + initScale + "'");
        }
        Check.atLeast("fsdp.loss_scale_growth_interval", growthInterval, 1);
    }

    public static LossScaling none() {
        return new LossScaling(Mode.NONE, 1, DEFAULT_GROWTH_INTERVAL);
    }

    public static LossScaling dynamic() {
        return new LossScaling(Mode.DYNAMIC, DEFAULT_INIT_SCALE, DEFAULT_GROWTH_INTERVAL);
    }

    /** {@code auto}: dynamic where anything travels or is computed in fp16, else none. */
    public static LossScaling auto(Precision paramDtype, Precision reduceDtype) {
        return paramDtype == Precision.FP16 || reduceDtype == Precision.FP16 ? dynamic() : none();
    }

    /** {@code fsdp.loss_scale} as a user writes it: none, dynamic, or the static scale. */
    public Object spelling() {
        return switch (mode) {
            case NONE, DYNAMIC -> mode.name().toLowerCase(Locale.ROOT);
            case STATIC -> initScale;
        };
    }

    /** {@code fsdp.loss_scale_init} as the effective config writes it: the dynamic scale's first, else the default. */
    public double initSetting() {
        return mode == Mode.DYNAMIC ? initScale : DEFAULT_INIT_SCALE;
    }

    /**
     * Binds the three keys of {@code s} (the fsdp section): {@code loss_scale} is {@code auto} (the default:
     * {@link #auto}), {@code dynamic}, {@code none} or a positive number; the other two are read by dynamic scaling.
     */
    static LossScaling bind(ConfigSection s, Precision paramDtype, Precision reduceDtype) {
        String text = s.string("loss_scale", "auto").strip().toLowerCase(Locale.ROOT);
        double init = s.number("loss_scale_init", DEFAULT_INIT_SCALE);
        int interval = s.integer("loss_scale_growth_interval", DEFAULT_GROWTH_INTERVAL);
        Mode mode = switch (text) {
            case "auto" -> auto(paramDtype, reduceDtype).mode();
            case "none" -> Mode.NONE;
            case "dynamic" -> Mode.DYNAMIC;
            default -> Mode.STATIC;
        };
        return switch (mode) {
            case NONE -> new LossScaling(Mode.NONE, 1, interval);
            case DYNAMIC -> new LossScaling(Mode.DYNAMIC, init, interval);
            case STATIC -> new LossScaling(Mode.STATIC, staticScale(text), interval);
        };
    }

    private static double staticScale(String text) {
        double value;
        try {
            value = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            value = Double.NaN;
        }
        if (!(value > 0) || !Double.isFinite(value)) {
            throw new UserError("config key 'fsdp.loss_scale' must be auto, dynamic, none or a positive number, got '"
                    + text + "'");
        }
        return value;
    }
}
