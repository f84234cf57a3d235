// Vite bundles imported CSS; tsc only needs to know the import is fine.
declare module "*.css";
