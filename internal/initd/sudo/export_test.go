package sudo

// For sudo_test, which runs den-init's server on a socket of its own.
var (
	ListenAt = listen
	MainAt   = sudoMain
)
