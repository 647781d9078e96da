package quiver.conformance;

import java.util.HashMap;
import java.util.Map;

/** A scenario's command line: {@code key=value} words, with typed getters and defaults. */
final class Options {
    private final Map<String, String> values = new HashMap<>();

    Options(String[] args, int from) {
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value, got " + args[i]);
            }
            values.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
    }

    String text(String key) {
        String value = values.get(key);
        if (value == null) {
            throw new IllegalArgumentException("missing " + key + "=...");
        }
        return value;
    }

    String text(String key, String otherwise) {
        return values.getOrDefault(key, otherwise);
    }

    int number(String key, int otherwise) {
        return values.containsKey(key) ? Integer.parseInt(values.get(key)) : otherwise;
    }

    boolean flag(String key) {
        return Boolean.parseBoolean(values.getOrDefault(key, "false"));
    }
}
