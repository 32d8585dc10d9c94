/* The one mark of an entry point libhar exports: the library is built with
 * hidden visibility, so only what carries it reaches the application. */
#pragma once
#define HAR_EXPORT __attribute__((visibility("default")))
