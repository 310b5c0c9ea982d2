// Package files opens and publishes the files a job reads and writes, local
// or s3:// objects: inputs opened for random access, outputs created
// exclusively beside their destination and renamed into place only when
// complete, stale temporaries removed, and every written path checked
// against every read one. It runs in the module.
package files
