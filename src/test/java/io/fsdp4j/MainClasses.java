package io.fsdp4j;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;

/** fsdp4j's main classes (not the tests'), imported once for every ArchUnit rule of the suite. */
public final class MainClasses {
    private static JavaClasses classes;

    private MainClasses() {}

    /** The classes of io.fsdp4j and below, read from the main class files. */
    public static synchronized JavaClasses imported() {
        if (classes == null) {
            classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                    .importPackages("io.fsdp4j");
        }
        return classes;
    }
}
