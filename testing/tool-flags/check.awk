# The flag check of `check` (see there). ARGV[1] is the table, the rest the command line to check.
BEGIN {
    table = ARGV[1]
    n = 0
    for (i = 2; i < ARGC; i++) { arg[++n] = ARGV[i]; delete ARGV[i] }
    delete ARGV[1]
    tool = "the tool"
    while ((getline line < table) > 0) {
        if (line ~ /^#[ ]*tool:/) { tool = line; sub(/^#[ ]*tool:[ ]*/, "", tool); continue }
        if (line ~ /^[ \t]*#/ || line ~ /^[ \t]*$/) continue
        nf = split(line, w, /[ \t]+/)
        key = ""
        for (j = 1; j <= nf; j++) {
            if (w[j] == "") continue
            if (w[j] ~ /^-/) break
            key = key (key == "" ? "" : " ") w[j]
        }
        known[key] = 1
        for (; j <= nf; j++) {
            f = w[j]
            if (f == "") continue
            takes = (f ~ /=$/)
            sub(/=$/, "", f)
            has[key, f] = 1
            if (takes) value_flag[f] = 1
        }
    }
    close(table)
    # The command: the words that are neither flags nor a flag's value, longest known prefix first.
    words = 0
    for (i = 1; i <= n; i++) {
        a = arg[i]
        if (a == "--") break
        if (a ~ /^-/ && a != "-") {
            name = a
            sub(/=.*/, "", name)
            if (a !~ /=/ && (name in value_flag)) i++
            continue
        }
        word[++words] = a
    }
    command = ""
    for (k = (words < 3 ? words : 3); k >= 1; k--) {
        candidate = word[1]
        for (m = 2; m <= k; m++) candidate = candidate " " word[m]
        if (candidate in known) { command = candidate; break }
    }
    if (command == "" || command == "*") {
        printf "Error: unknown command \"%s\" for \"%s\"\n", (words ? word[1] : ""), tool > "/dev/stderr"
        exit 1
    }
    for (i = 1; i <= n; i++) {
        a = arg[i]
        if (a == "--") break
        if (a !~ /^-/ || a == "-") continue
        name = a
        sub(/=.*/, "", name)
        if (!(("*", name) in has) && !((command, name) in has)) {
            if (name ~ /^-[^-]/)
                printf "Error: unknown shorthand flag: '%s' in %s\n", substr(name, 2, 1), a > "/dev/stderr"
            else
                printf "Error: unknown flag: %s\n", name > "/dev/stderr"
            printf "(%s has no %s for \"%s\")\n", tool, name, command > "/dev/stderr"
            exit 1
        }
        if (a !~ /=/ && (name in value_flag)) i++
    }
    exit 0
}
